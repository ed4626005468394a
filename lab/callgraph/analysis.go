package main

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/cha"
	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

// program is a module loaded and analysed once: its SSA and its VTA call graph, which any
// number of walks from different roots can share.
type program struct {
	root   string // the module's directory
	module string // the module's path
	fset   *token.FileSet
	prog   *ssa.Program
	graph  *callgraph.Graph
	makers map[*ssa.Function][]*ssa.Function // see makersOf
}

// moduleRoot returns the directory holding the go.mod that governs dir.
func moduleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("error finding the module's root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or any directory above it", dir)
		}
	}
}

// load loads every package of the module at root (./..., without tests), builds its SSA with
// generics instantiated, as VTA requires, and the VTA call graph seeded with CHA's.
func load(root string) (*program, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("error reading go.mod: %w", err)
	}
	module := modfile.ModulePath(gomod)
	if module == "" {
		return nil, fmt.Errorf("no module path in %s", filepath.Join(root, "go.mod"))
	}

	// Only the module's own packages are loaded from source; their dependencies come from export
	// data, so their functions have no bodies. The walk stops at them anyway (see the package
	// doc), and building the standard library's, River's, pgx's and stripe-go's bodies only to
	// stop there would cost most of the run.
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
			packages.NeedImports | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax,
		Dir: root,
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, fmt.Errorf("error loading the module's packages: %w", err)
	}
	var loadErrs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, fmt.Errorf("%s: %s", p.PkgPath, e.Msg))
		}
	})
	if len(loadErrs) > 0 {
		return nil, fmt.Errorf("error loading the module's packages: %w", errors.Join(loadErrs...))
	}

	prog, _ := ssautil.Packages(pkgs, ssa.InstantiateGenerics)
	prog.Build()
	funcs := ssautil.AllFunctions(prog)
	graph := vta.CallGraph(funcs, cha.CallGraph(prog))
	return &program{root: root, module: module, fset: prog.Fset, prog: prog, graph: graph, makers: makersOf(funcs)}, nil
}

// shortPath returns pkgPath relative to the module ("phases"), or pkgPath itself outside it.
func (p *program) shortPath(pkgPath string) string {
	if pkgPath == p.module {
		return "."
	}
	return strings.TrimPrefix(pkgPath, p.module+"/")
}

// declOf returns the function whose source fn is: its generic origin for an instance, and
// for a closure the closure within that origin.
func declOf(fn *ssa.Function) *ssa.Function {
	if o := fn.Origin(); o != nil {
		return o
	}
	return fn
}

// topOf returns the package-level function or method that encloses fn's source.
func topOf(fn *ssa.Function) *ssa.Function {
	fn = declOf(fn)
	for fn.Parent() != nil {
		fn = fn.Parent()
	}
	return fn
}

// name returns fn's name as the README and -roots write it: the package relative to the
// module, then the function, or the receiver type in parentheses and the method
// ("phases.(*Executor).keepLease"); a closure adds its index to its parent's ("...$1").
// Type parameters are left out. A synthetic function without a package gets ssa's name.
func (p *program) name(fn *ssa.Function) string {
	fn = declOf(fn)
	top := topOf(fn)
	if top.Pkg == nil {
		return fn.String()
	}
	var b strings.Builder
	b.WriteString(p.shortPath(top.Pkg.Pkg.Path()))
	b.WriteString(".")
	if recv := top.Signature.Recv(); recv != nil {
		t := recv.Type()
		star := ""
		if ptr, ok := t.(*types.Pointer); ok {
			t, star = ptr.Elem(), "*"
		}
		typeName := types.TypeString(t, nil)
		if named, ok := t.(*types.Named); ok {
			typeName = named.Obj().Name()
		}
		fmt.Fprintf(&b, "(%s%s).", star, typeName)
	}
	b.WriteString(top.Name())
	b.WriteString(strings.TrimPrefix(fn.Name(), top.Name())) // a closure's "$1$2"
	return b.String()
}

// nameKey normalises a function's name for comparison: "(*T).M", "(T).M" and "T.M" are the
// same method, since Go allows no two methods of that name on T and *T.
func nameKey(name string) string {
	return strings.NewReplacer("(", "", ")", "", "*", "").Replace(name)
}

// rootPattern is a root as -roots takes it: a package path, then a function or a method.
var rootPattern = regexp.MustCompile(`^(.+?)\.(?:\((\*?)(\w+)\)\.)?(\w+)$`)

// resolveRoot finds the function that name (see program.name) denotes. The package may be
// written relative to the module or in full.
func (p *program) resolveRoot(name string) (*ssa.Function, error) {
	m := rootPattern.FindStringSubmatch(name)
	if m == nil {
		return nil, fmt.Errorf("root %q: not of the form pkg.Func or pkg.(*Type).Method", name)
	}
	pkgPath, typeName, funcName := m[1], m[3], m[4]
	pkg := p.prog.ImportedPackage(pkgPath)
	if pkg == nil && pkgPath != "." {
		pkg = p.prog.ImportedPackage(p.module + "/" + pkgPath)
	} else if pkgPath == "." {
		pkg = p.prog.ImportedPackage(p.module)
	}
	if pkg == nil {
		return nil, fmt.Errorf("root %q: no package %s in the module", name, pkgPath)
	}
	if typeName == "" {
		fn := pkg.Func(funcName)
		if fn == nil {
			return nil, fmt.Errorf("root %q: package %s has no function %s", name, pkgPath, funcName)
		}
		return fn, nil
	}
	typ := pkg.Type(typeName)
	if typ == nil {
		return nil, fmt.Errorf("root %q: package %s has no type %s", name, pkgPath, typeName)
	}
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(typ.Type()), true, pkg.Pkg, funcName)
	method, ok := obj.(*types.Func)
	if !ok {
		return nil, fmt.Errorf("root %q: type %s has no method %s", name, typeName, funcName)
	}
	fn := p.prog.FuncValue(method)
	if fn == nil || topOf(fn).Pkg != pkg {
		// A method promoted from an embedded type is declared elsewhere: say where.
		return nil, fmt.Errorf("root %q: method %s of %s is not declared in package %s", name, funcName, typeName, pkgPath)
	}
	return fn, nil
}

// walked is what a walk found.
type walked struct {
	// reached are the functions of kept packages reached, in the order reached.
	reached []*ssa.Function
	// via says, for each function reached, the function it was first reached from (nil for a
	// root), so that a path from a root can be told (-why).
	via map[*ssa.Function]*ssa.Function
	// leftOut are the functions that the call graph says a reached function may call through a
	// function value, but whose value only kept functions off the path make.
	leftOut []*ssa.Function
}

// walk follows the call graph from roots by the rule of the package doc: it goes on from a
// function of a kept package (or a synthetic wrapper without a package, which only forwards)
// to every function the call graph says it may call and every function it refers to as a
// value (a closure, a method value, a function passed along), and stops at a function of any
// other package. A call through a function value enters its callee only if the value can
// exist on the path (see madeOnPath).
func (p *program) walk(roots []*ssa.Function, kept map[string]bool) walked {
	w := walked{via: map[*ssa.Function]*ssa.Function{}}
	seen := map[*ssa.Function]bool{}
	isKept := func(fn *ssa.Function) bool {
		top := topOf(fn)
		return top.Pkg != nil && kept[top.Pkg.Pkg.Path()]
	}
	// madeOnPath reports whether some function that makes fn's value (creates the closure,
	// takes the function or method as a value) has been reached, or runs before any ride: a
	// package's initialisation, or code outside the kept packages (a command's wiring). VTA
	// merges every call of a function, so a function-typed parameter gets every value any
	// caller passes: the cancel's handler passes writeAnswer its own outcome function.
	madeOnPath := func(fn *ssa.Function) bool {
		for _, m := range p.makers[fn] {
			if seen[m] || isInit(topOf(m)) || !isKept(m) {
				return true
			}
		}
		return false
	}
	pending := map[*ssa.Function]bool{} // met through a function value not (yet) made
	type step struct {
		fn, from *ssa.Function
		dynamic  bool // a call through a function value
	}
	var queue []step
	for _, r := range roots {
		queue = append(queue, step{r, nil, false})
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		fn := s.fn
		if seen[fn] {
			continue
		}
		if s.dynamic && !madeOnPath(fn) {
			// A maker reached later refers to fn and so queues it again.
			pending[fn] = true
			continue
		}
		seen[fn] = true
		delete(pending, fn)
		top := topOf(fn)
		if top.Pkg == nil {
			if fn.Synthetic == "" {
				continue // not expected: a source function always has a package
			}
		} else if !kept[top.Pkg.Pkg.Path()] {
			continue
		}
		w.via[fn] = s.from
		if top.Pkg != nil {
			w.reached = append(w.reached, fn)
		}
		if node := p.graph.Nodes[fn]; node != nil {
			for _, e := range node.Out {
				c := e.Site.Common()
				dynamic := !c.IsInvoke() && c.StaticCallee() == nil
				queue = append(queue, step{e.Callee.Func, fn, dynamic})
			}
		}
		for _, f := range functionsIn(fn, true) {
			queue = append(queue, step{f, fn, false})
		}
	}
	for fn := range pending {
		w.leftOut = append(w.leftOut, fn)
	}
	return w
}

// makersOf maps each function to the functions among funcs that make it a value.
func makersOf(funcs map[*ssa.Function]bool) map[*ssa.Function][]*ssa.Function {
	makers := map[*ssa.Function][]*ssa.Function{}
	for fn := range funcs {
		for _, f := range functionsIn(fn, false) {
			if !slices.Contains(makers[f], fn) {
				makers[f] = append(makers[f], fn)
			}
		}
	}
	return makers
}

// functionsIn returns the functions fn's code refers to: those it makes a value (creates as a
// closure, takes as a value) and, with callees, those it calls by name.
func functionsIn(fn *ssa.Function, callees bool) []*ssa.Function {
	var out []*ssa.Function
	var ops []*ssa.Value
	for _, b := range fn.Blocks {
		for _, instr := range b.Instrs {
			var callee *ssa.Value
			if call, ok := instr.(ssa.CallInstruction); ok && !callees {
				callee = &call.Common().Value
			}
			for _, op := range instr.Operands(ops[:0]) {
				if f, ok := (*op).(*ssa.Function); ok && op != callee {
					out = append(out, f)
				}
			}
		}
	}
	return out
}
