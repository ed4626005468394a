package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// listFormat is how a list command prints its rows: a table by default, for reading, or one JSON
// object per line with -json, for jq and scripts. Each command gives only its columns and its
// JSON; the printing is written once here.
type listFormat[T any] struct {
	noun   string           // what one row is, for errors: "abandoned request"
	id     func(T) any      // names a row in an error
	header []string         // the table's column titles
	cells  func(T) []string // a row's table cells, in the header's order
	object func(T) any      // a row as -json prints it
}

// write prints rows to w: as a table, or with asJSON as one JSON object per line.
func (f listFormat[T]) write(w io.Writer, rows []T, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(f.object(r)); err != nil {
				return fmt.Errorf("error writing %s %v: %w", f.noun, f.id(r), err)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(f.header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(f.cells(r), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("error writing %ss: %w", f.noun, err)
	}
	return nil
}

// oneLine joins the words of s with single spaces: a line break or tab in a cell would break
// the table.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
