package main

import (
	"strings"
	"testing"
)

func TestListFormat(t *testing.T) {
	t.Parallel()
	type row struct {
		id    int
		name  string
		error string
	}
	format := listFormat[row]{
		noun:   "row",
		id:     func(r row) any { return r.id },
		header: []string{"ID", "NAME", "LAST ERROR"},
		cells:  func(r row) []string { return []string{strings.Repeat("9", r.id), r.name, oneLine(r.error)} },
		object: func(r row) any { return map[string]any{"id": r.id, "error": r.error} },
	}
	rows := []row{{1, "a", "dial tcp:\n\tconnection refused"}, {3, "bb", ""}}

	t.Run("TableOneLinePerRowInColumns", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		if err := format.write(&out, rows, false); err != nil {
			t.Fatal(err)
		}
		want := "ID   NAME  LAST ERROR\n" +
			"9    a     dial tcp: connection refused\n" +
			"999  bb    \n"
		if out.String() != want {
			t.Fatalf("want\n%q\ngot\n%q", want, out.String())
		}
	})

	t.Run("JSONOneObjectPerLine", func(t *testing.T) {
		t.Parallel()
		var out strings.Builder
		if err := format.write(&out, rows, true); err != nil {
			t.Fatal(err)
		}
		want := `{"error":"dial tcp:\n\tconnection refused","id":1}` + "\n" + `{"error":"","id":3}` + "\n"
		if out.String() != want {
			t.Fatalf("want\n%s\ngot\n%s", want, out.String())
		}
	})
}
