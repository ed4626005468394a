package race

import (
	"slices"
	"testing"
)

func TestReports(t *testing.T) {
	t.Parallel()
	report := "WARNING: DATA RACE\nWrite at 0x00c000014108 by goroutine 7:\n  main.main.func1()\n=================="
	for _, tt := range []struct {
		name   string
		output string
		want   []string
	}{
		{"None", "starting\nFound nothing\n", nil},
		{"One", "starting\n==================\n" + report + "\nracy: done\nFound 1 data race(s)\n", []string{report}},
		{"Two", "==================\n" + report + "\n==================\n" + report + "\n", []string{report, report}},
		{
			"PrefixedByAManager",
			"api.1 | ==================\napi.1 | WARNING: DATA RACE\napi.1 | Read at 0x1 by goroutine 3:\napi.1 | ==================\napi.1 | ok\n",
			[]string{"api.1 | WARNING: DATA RACE\napi.1 | Read at 0x1 by goroutine 3:\napi.1 | =================="},
		},
		{"CutShortByDeath", "==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:", []string{"WARNING: DATA RACE\nWrite at 0x1 by goroutine 7:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Reports(tt.output); !slices.Equal(got, tt.want) {
				t.Errorf("want reports %q, got %q", tt.want, got)
			}
		})
	}
}
