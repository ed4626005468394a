package bootstrap

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmeConfigRow is a row of the README's table of variables: "| `VAR` | `default` | ... |".
var readmeConfigRow = regexp.MustCompile("^\\| `([A-Z_]+)` \\| ([^|]+) \\|")

// TestReadmeConfigTable holds the README's table of variables to Config: every variable that
// Config documents has a row, and every default the table writes in code is the one LoadConfig
// gives.
func TestReadmeConfigTable(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	fields := configFieldsByVariable(t)

	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if m := readmeConfigRow.FindStringSubmatch(scanner.Text()); m != nil {
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}

	for variable := range fields {
		if _, ok := rows[variable]; !ok {
			t.Errorf("README: the table of variables has no row for %s, which Config reads", variable)
		}
	}
	checked := 0
	for variable, cell := range rows {
		field, ok := fields[variable]
		if !ok {
			if variable != "API_URL" { // the simulator's, not a process's
				t.Errorf("README: the table of variables lists %s, which Config does not read", variable)
			}
			continue
		}
		doc, ok := strings.CutPrefix(cell, "`")
		if !ok {
			continue // a default in words: (required), Stripe's own, (unset: ...)
		}
		doc = strings.TrimSuffix(doc, "`")
		got := reflect.ValueOf(*cfg).FieldByName(field).Interface()
		if !readmeValueIs(doc, got) {
			t.Errorf("README: %s's default is written %q, LoadConfig gives %v", variable, doc, got)
		}
		checked++
	}
	if checked < 12 {
		t.Fatalf("want at least 12 of the README's defaults checked, checked %d", checked)
	}
}

// configFieldsByVariable maps each variable that Config's comments name, "(VARIABLE, ...", to
// its field.
func configFieldsByVariable(t *testing.T) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	config := file.Scope.Lookup("Config").Decl.(*ast.TypeSpec).Type.(*ast.StructType)
	variable := regexp.MustCompile(`^\w+ \(([A-Z_]+)[,)]`)
	fields := map[string]string{}
	for _, field := range config.Fields.List {
		if m := variable.FindStringSubmatch(strings.Join(strings.Fields(field.Doc.Text()), " ")); m != nil {
			fields[m[1]] = field.Names[0].Name
		}
	}
	if len(fields) < 15 {
		t.Fatalf("want at least 15 variables named in Config's comments, found %d", len(fields))
	}
	return fields
}

// readmeValueIs reports whether doc, a default as the README writes it, is got.
func readmeValueIs(doc string, got any) bool {
	switch got := got.(type) {
	case time.Duration:
		d, err := time.ParseDuration(doc)
		return err == nil && d == got
	case int:
		n, err := strconv.Atoi(doc)
		return err == nil && n == got
	case bool:
		b, err := strconv.ParseBool(doc)
		return err == nil && b == got
	case slog.Level:
		var level slog.Level
		return level.UnmarshalText([]byte(doc)) == nil && level == got
	case string:
		return doc == got
	}
	return false
}
