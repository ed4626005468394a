package bootstrap

import (
	"bufio"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// configTablePath is the page that documents every variable, from this package's directory.
const configTablePath = "../../../docs/operations.md"

// configTableRow is a row of docs/operations.md's table of variables: "| `VAR` | `default` | ... |".
var configTableRow = regexp.MustCompile("^\\| `([A-Z_]+)` \\| ([^|]+) \\|")

// TestConfigTable holds docs/operations.md's table of variables to Config: every variable that
// Config documents has a row, and every default the table writes in code is the one LoadConfig
// gives.
func TestConfigTable(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	fields := configFieldsByVariable(t)

	f, err := os.Open(configTablePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if m := configTableRow.FindStringSubmatch(scanner.Text()); m != nil {
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}

	for variable := range fields {
		if _, ok := rows[variable]; !ok {
			t.Errorf("docs/operations.md: the table of variables has no row for %s, which Config reads", variable)
		}
	}
	checked := 0
	for variable, cell := range rows {
		field, ok := fields[variable]
		if !ok {
			// API_URL is the simulator's, not a process's; OTEL_* are OpenTelemetry's, read by its
			// SDK when internal/telemetry sets it up.
			if variable != "API_URL" && !strings.HasPrefix(variable, "OTEL_") {
				t.Errorf("docs/operations.md: the table of variables lists %s, which Config does not read", variable)
			}
			continue
		}
		doc, ok := strings.CutPrefix(cell, "`")
		if !ok {
			continue // a default in words: (required), Stripe's own, (unset: ...)
		}
		doc = strings.TrimSuffix(doc, "`")
		got := reflect.ValueOf(*cfg).FieldByName(field).Interface()
		if !tableValueIs(doc, got) {
			t.Errorf("docs/operations.md: %s's default is written %q, LoadConfig gives %v", variable, doc, got)
		}
		checked++
	}
	if checked < 12 {
		t.Fatalf("want at least 12 of docs/operations.md's defaults checked, checked %d", checked)
	}
}

// configFieldsByVariable maps each variable that Config's comments name, "(VARIABLE, ...", to
// its field.
func configFieldsByVariable(t *testing.T) map[string]string {
	t.Helper()
	variable := regexp.MustCompile(`^\w+ \(([A-Z_]+)[,)]`)
	fields := map[string]string{}
	for _, field := range configFields(t) {
		if m := variable.FindStringSubmatch(fieldDoc(field)); m != nil {
			fields[m[1]] = field.Names[0].Name
		}
	}
	if len(fields) < 15 {
		t.Fatalf("want at least 15 variables named in Config's comments, found %d", len(fields))
	}
	return fields
}

// tableValueIs reports whether doc, a default as the table of variables writes it, is got: as
// Config's comments write it, but for text, which the table leaves unquoted.
func tableValueIs(doc string, got any) bool {
	switch got.(type) {
	case string, slog.Level:
		doc = strconv.Quote(doc)
	}
	return documentedValueIs(doc, got)
}
