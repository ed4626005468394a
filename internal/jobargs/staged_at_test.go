package jobargs_test

import (
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/jobargs"
)

func TestStagedAt(t *testing.T) {
	t.Parallel()
	stagedAt := time.Date(2025, 3, 1, 12, 30, 0, 123456000, time.FixedZone("CET", 3600))

	for _, tt := range []struct {
		name     string
		metadata string
		want     string // the metadata AddStagedAt returns
	}{
		{"Empty", "", `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"EmptyObject", "{}", `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"KeepsOtherKeys", `{"a": 1}`, `{"a":1,"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
		{"Replaces", `{"rocketrides_staged_at": "2000-01-01T00:00:00Z"}`, `{"rocketrides_staged_at":"2025-03-01T11:30:00.123456Z"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := jobargs.AddStagedAt([]byte(tt.metadata), stagedAt)
			if err != nil || string(got) != tt.want {
				t.Fatalf("AddStagedAt: want %s, got %s (%v)", tt.want, got, err)
			}
			read, ok := jobargs.StagedAt(got)
			if !ok || !read.Equal(stagedAt) {
				t.Fatalf("StagedAt: want %s, got %s (%v)", stagedAt, read, ok)
			}
		})
	}

	t.Run("RefusesMetadataThatIsNoObject", func(t *testing.T) {
		t.Parallel()
		if _, err := jobargs.AddStagedAt([]byte(`[1]`), stagedAt); err == nil {
			t.Fatal("want an error")
		}
	})

	t.Run("ReadsNothingWhereNothingWasAdded", func(t *testing.T) {
		t.Parallel()
		for _, metadata := range []string{"", "{}", `{"a": 1}`, `{"rocketrides_staged_at": "yesterday"}`, "not json"} {
			if got, ok := jobargs.StagedAt([]byte(metadata)); ok {
				t.Errorf("%q: want nothing, got %s", metadata, got)
			}
		}
	})
}
