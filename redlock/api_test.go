package redlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exportedNameBudget is the most exported names the redlock package may
// have, counted as exportedNames counts them (108 when the budget was set).
// A new name must earn its place: raise the budget only with a reason, or
// fold the name into one already there.
const exportedNameBudget = 112

// exportedNames lists the package's exported names, read from its non-test
// files: every exported top-level identifier (type, function, variable,
// constant) and every exported method declared on an exported type, as
// "Type.Method". Methods declared inside interfaces and struct fields are
// not counted (they belong to the type that is).
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
					names = append(names, recv+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// receiverType is the name of a method's receiver type, without its pointer
// or type parameters.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestExportedNameBudget keeps redlock's public API small enough to hold in
// one's head: it fails when the package's exported names pass
// exportedNameBudget, and lists them.
func TestExportedNameBudget(t *testing.T) {
	names := exportedNames(t, ".")
	if len(names) == 0 {
		t.Fatal("no exported names found: the count reads the wrong directory")
	}
	t.Logf("redlock exports %d names (budget %d)", len(names), exportedNameBudget)
	if len(names) > exportedNameBudget {
		t.Errorf("redlock exports %d names, more than its budget of %d:\n%s",
			len(names), exportedNameBudget, strings.Join(names, "\n"))
	}
}
