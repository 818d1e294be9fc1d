package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestLazyRegexps_Compile: every pattern given to lazyregexp.New as a
// string literal compiles. regexp.MustCompile at package init failed
// every test binary that linked a broken pattern; compiled on first use,
// a pattern no test happens to match would fail only in production.
func TestLazyRegexps_Compile(t *testing.T) {
	n := 0
	for _, p := range list(t, "./...") {
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(node ast.Node) bool {
				call, ok := node.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "New" {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "lazyregexp" {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true // built at run time: its package's tests use it
				}
				expr, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if _, err := regexp.Compile(expr); err != nil {
					t.Errorf("%s: lazyregexp.New(%s) does not compile: %v", path, lit.Value, err)
				}
				n++
				return true
			})
		}
	}
	if n < 20 {
		t.Errorf("found %d literal patterns given to lazyregexp.New; the walk misses them (22 when this was written)", n)
	}
}
