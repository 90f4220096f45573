package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every process of the binary runs every linked package's init, so a CNI
// call pays for what any role sets up at package level (issue #25). Our
// packages compile their regular expressions on first use
// (sync.OnceValue), never in a package-level initializer.
func TestNoRegexpCompiledAtInit(t *testing.T) {
	for _, file := range linkedSources(t) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, call := range initCalls(g, "regexp") {
					t.Errorf("%s: package-level %s runs in every process's init; compile on first use (sync.OnceValue)", fset.Position(call.Pos()), render(call))
				}
			}
		}
	}
}

// initCalls are the calls of package pkg in a var declaration's
// initializers that run at init: those outside function literals.
func initCalls(g *ast.GenDecl, pkg string) []*ast.CallExpr {
	var out []*ast.CallExpr
	for _, spec := range g.Specs {
		for _, v := range spec.(*ast.ValueSpec).Values {
			ast.Inspect(v, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
							out = append(out, n)
						}
					}
				}
				return true
			})
		}
	}
	return out
}

func render(call *ast.CallExpr) string {
	sel := call.Fun.(*ast.SelectorExpr)
	return sel.X.(*ast.Ident).Name + "." + sel.Sel.Name
}

// linkedSources are the non-test Go files of this module's packages that
// the binary links.
func linkedSources(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Module", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var files []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath, Dir string
			GoFiles         []string
			Module          *struct{ Path string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "github.com/calico-aio/calico-aio" {
			continue
		}
		for _, f := range p.GoFiles {
			files = append(files, filepath.Join(p.Dir, f))
		}
	}
	if len(files) < 100 {
		t.Fatalf("go list found %d source files of this module in the binary", len(files))
	}
	return files
}
