package bootstrap

import (
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/netip"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// documentedDefault is how a Config field's comment states its default:
// "(VARIABLE, default VALUE" and then ")" or ", the.Constant)".
var documentedDefault = regexp.MustCompile(`\(([A-Z_]+), default ([^,)]+)`)

// TestConfigDocs holds each default that Config's comments state to the value LoadConfig
// gives, so that a comment cannot drift from the constant it names.
func TestConfigDocs(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, field := range configFields(t) {
		m := documentedDefault.FindStringSubmatch(fieldDoc(field))
		if m == nil {
			continue
		}
		name, variable, doc := field.Names[0].Name, m[1], m[2]
		got := reflect.ValueOf(*cfg).FieldByName(name).Interface()
		if !documentedValueIs(doc, got) {
			t.Errorf("%s (%s): the comment says default %s, LoadConfig gives %v", name, variable, doc, got)
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("want the defaults of at least 15 fields checked, found %d stated", checked)
	}
}

// configFields are the fields of Config, as config.go declares them with their comments.
func configFields(t *testing.T) []*ast.Field {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return file.Scope.Lookup("Config").Decl.(*ast.TypeSpec).Type.(*ast.StructType).Fields.List
}

// fieldDoc is field's comment on one line.
func fieldDoc(field *ast.Field) string { return strings.Join(strings.Fields(field.Doc.Text()), " ") }

// documentedValueIs reports whether doc, a default as Config's comments write it, is got.
func documentedValueIs(doc string, got any) bool {
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
		s, err := strconv.Unquote(doc)
		var level slog.Level
		return err == nil && level.UnmarshalText([]byte(s)) == nil && level == got
	case []netip.Prefix:
		return strings.HasPrefix(doc, "unset") && len(got) == 0
	case string:
		if strings.HasPrefix(doc, "unset") {
			return got == ""
		}
		s, err := strconv.Unquote(doc)
		return err == nil && s == got
	}
	return false
}
