package main

import (
	"cmp"
	"go/ast"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/ssa"
)

// function is one function a ride reads: a declared function or method, or a closure whose
// enclosing declaration was not reached (a closure inside a reached one is read with it).
type function struct {
	Name      string `json:"name"`
	File      string `json:"file"` // relative to the module's root
	BodyLines int    `json:"body_lines"`
	DocLines  int    `json:"doc_lines"`

	lines []int // the body's lines in File
}

// count turns the reached functions into the functions a reader reads, by the counting rule of
// the package doc, in the order of their files and lines.
func (p *program) count(reached []*ssa.Function) []*function {
	decls := map[*ssa.Function]bool{}
	for _, fn := range reached {
		decls[declOf(fn)] = true
	}
	// unitOf is the outermost reached function enclosing fn, fn itself included.
	unitOf := func(fn *ssa.Function) *ssa.Function {
		unit := declOf(fn)
		for f := unit.Parent(); f != nil; f = f.Parent() {
			if decls[f] {
				unit = f
			}
		}
		return unit
	}

	type sortKey struct {
		file string
		line int
	}
	units := map[*ssa.Function]*function{}
	keys := map[*function]sortKey{}
	for _, fn := range reached {
		unit := unitOf(fn)
		if units[unit] != nil || isInit(unit) {
			continue
		}
		f := p.measure(unit)
		if f == nil {
			continue // synthetic: no source of its own
		}
		units[unit] = f
		keys[f] = sortKey{f.File, p.fset.Position(unit.Syntax().Pos()).Line}
	}
	out := make([]*function, 0, len(units))
	for _, f := range units {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *function) int {
		ka, kb := keys[a], keys[b]
		return cmp.Or(cmp.Compare(ka.file, kb.file), cmp.Compare(ka.line, kb.line))
	})
	return out
}

// isInit reports whether fn is a package's initialisation, which runs before any ride. A
// closure inside it is not: it may be stored in a variable and run on the path.
func isInit(fn *ssa.Function) bool {
	fn = declOf(fn)
	return fn.Parent() == nil && fn.Signature.Recv() == nil &&
		(fn.Name() == "init" || strings.HasPrefix(fn.Name(), "init#"))
}

// measure returns fn's file, body lines and doc comment lines, or nil if fn has no syntax.
func (p *program) measure(fn *ssa.Function) *function {
	var body *ast.BlockStmt
	var doc *ast.CommentGroup
	switch s := fn.Syntax().(type) {
	case *ast.FuncDecl:
		body, doc = s.Body, s.Doc
	case *ast.FuncLit:
		body = s.Body
	}
	if body == nil {
		return nil
	}
	open, closing := p.fset.Position(body.Lbrace), p.fset.Position(body.Rbrace)
	rel, err := filepath.Rel(p.root, open.Filename)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil
	}
	f := &function{Name: p.name(fn), File: filepath.ToSlash(rel)}
	// The lines between the braces; a body written on the brace's own line is one line.
	for l := open.Line + 1; l < closing.Line; l++ {
		f.lines = append(f.lines, l)
	}
	if open.Line == closing.Line && len(body.List) > 0 {
		f.lines = append(f.lines, open.Line)
	}
	f.BodyLines = len(f.lines)
	if doc != nil {
		f.DocLines = p.fset.Position(doc.End()).Line - p.fset.Position(doc.Pos()).Line + 1
	}
	return f
}
