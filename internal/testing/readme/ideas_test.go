package readme

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top level, seen from this package's directory.
const root = "../../.."

// backticked finds `code spans` in a line of Markdown.
var backticked = regexp.MustCompile("`([^`]+)`")

// ideaRow is one row of the README's table of the article's ideas.
type ideaRow struct {
	idea  string
	where string // the second column, as written
}

func readIdeaTable(t *testing.T) []ideaRow {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []ideaRow
	inTable := false
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "| Article idea |"):
			inTable = true
		case inTable && strings.HasPrefix(line, "| ---"):
		case inTable && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			if len(cells) != 2 {
				t.Fatalf("README: want two cells in the ideas table's row %q", line)
			}
			rows = append(rows, ideaRow{idea: strings.TrimSpace(cells[0]), where: strings.TrimSpace(cells[1])})
		case inTable:
			inTable = false
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestIdeaTableOneHop checks every row of the README's table of the article's ideas: each path it
// names exists, each identifier is declared in a file the row names (or, written pkg.Name, in
// that package), and each table (written "table `name`") is created by a migration.
func TestIdeaTableOneHop(t *testing.T) {
	t.Parallel()

	rows := readIdeaTable(t)
	if len(rows) < 12 {
		t.Fatalf("README: found %d rows in the ideas table, want the article's ideas (at least 12); did its header change?", len(rows))
	}
	for _, want := range []string{"Idempotency key relation", "Atomic phase", "Recovery points", "Stripe idempotency key", "Transactionally-staged job", "completer", "reaper"} {
		found := false
		for _, row := range rows {
			found = found || strings.Contains(row.idea, want)
		}
		if !found {
			t.Errorf("README: the ideas table has no row for %q", want)
		}
	}

	migrations := readMigrations(t)
	for _, row := range rows {
		var files []string
		var idents []string
		for _, m := range backticked.FindAllStringSubmatchIndex(row.where, -1) {
			code := row.where[m[2]:m[3]]
			switch {
			case strings.Contains(code, "/"):
				path := filepath.Join(root, code)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("README ideas table, row %q: %s does not exist", row.idea, code)
					continue
				}
				if strings.HasSuffix(code, ".go") {
					files = append(files, path)
				}
			case strings.HasSuffix(row.where[:m[0]], "table "):
				if !strings.Contains(migrations, "CREATE TABLE "+code+" ") {
					t.Errorf("README ideas table, row %q: no migration creates table %s", row.idea, code)
				}
			default:
				idents = append(idents, code)
			}
		}
		for _, ident := range idents {
			if !declared(t, ident, files) {
				t.Errorf("README ideas table, row %q: %s is declared in none of %v", row.idea, ident, relative(files))
			}
		}
	}
}

// declared reports whether ident is declared: Recv.Method or Name (a method of any type, or
// anything else of that name) in one of files, pkg.Name in package pkg's non-test files. A trailing * matches any name with that prefix.
func declared(t *testing.T, ident string, files []string) bool {
	t.Helper()
	recv, name, qualified := strings.Cut(ident, ".")
	if !qualified {
		recv, name = "*", ident // a bare name: a function, method, type, const or var
	}
	if qualified && isLower(recv) {
		// pkg.Name: look through the package.
		pkgFiles, err := filepath.Glob(filepath.Join(root, recv, "*.go"))
		if err != nil || len(pkgFiles) == 0 {
			return false
		}
		files, recv = nil, ""
		for _, f := range pkgFiles {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			for _, d := range declNames(decl) {
				if (recv == "*" || d.recv == recv) && matches(name, d.name) {
					return true
				}
			}
		}
	}
	return false
}

type declName struct{ recv, name string }

// declNames lists what decl declares: functions (with their receiver's type), types, consts
// and vars.
func declNames(decl ast.Decl) []declName {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		recv := ""
		if d.Recv != nil && len(d.Recv.List) == 1 {
			typ := d.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				recv = id.Name
			}
		}
		return []declName{{recv, d.Name.Name}}
	case *ast.GenDecl:
		var names []declName
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				names = append(names, declName{"", s.Name.Name})
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names = append(names, declName{"", n.Name})
				}
			}
		}
		return names
	}
	return nil
}

func matches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

func isLower(s string) bool { return s != "" && strings.ToLower(s[:1]) == s[:1] }

func readMigrations(t *testing.T) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "migrations", "*.sql"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	var all strings.Builder
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return all.String()
}

func relative(paths []string) []string {
	var out []string
	for _, p := range paths {
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
	}
	return out
}
