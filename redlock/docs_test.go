package redlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The documents whose citations TestDocsCiteWhatExists checks, relative to
// the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = ".."

// testFuncs maps every top-level Test, Benchmark, Example and Fuzz function
// of the repository's _test.go files (both modules) to the string literals
// of the file that declares it (where its subtests are named).
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	funcs := map[string][]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var lits []string
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil {
					lits = append(lits, s)
				}
			}
			return true
		})
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && citedName.MatchString(fd.Name.Name) {
				funcs[fd.Name.Name] = append(funcs[fd.Name.Name], lits...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

var (
	// citedName is a test function's name: Test, Benchmark, Example or Fuzz
	// alone or followed by an upper-case letter, digit or underscore (so
	// "Tested" and "Examples" are prose, not names).
	citedName = regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)([A-Z0-9_]\w*)?$`)
	// citation finds a name in running text, with an optional subtest path.
	citation = regexp.MustCompile(`\b(?:Test|Benchmark|Example|Fuzz)(?:[A-Z0-9_]\w*)?(?:/[\w-]+)*`)
	// definedHere is a function a document defines itself (a pattern for
	// the reader's own tests), which is not a citation.
	definedHere = regexp.MustCompile(`func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	// inBackticks is inline code.
	inBackticks = regexp.MustCompile("`([^`\n]+)`")
	// pathLike is inline code that names a file or directory of the
	// repository: no spaces or scheme, a '/' inside, and an extension or a
	// trailing '/'.
	pathLike = regexp.MustCompile(`^[\w.*-]+(?:/[\w.*-]+)*(?:\.[a-z]{1,5}|/)$`)
)

// missingTestNames returns the test names cited in doc that funcs lacks
// (subtests: the first element must be a string literal in the declaring
// file). Names the document defines in its own code are not citations.
func missingTestNames(doc string, funcs map[string][]string) []string {
	own := map[string]bool{}
	for _, m := range definedHere.FindAllStringSubmatch(doc, -1) {
		own[m[1]] = true
	}
	var missing []string
	for _, c := range citation.FindAllString(doc, -1) {
		name, sub, _ := strings.Cut(c, "/")
		if own[name] || !citedName.MatchString(name) {
			continue
		}
		if name == "Test" || name == "Benchmark" || name == "Fuzz" {
			continue // prose ("Test ..." at the start of a sentence)
		}
		lits, ok := funcs[name]
		if !ok {
			missing = append(missing, c)
			continue
		}
		if first, _, _ := strings.Cut(sub, "/"); sub != "" && !composed(first, lits) {
			missing = append(missing, c)
		}
	}
	return missing
}

// composed reports whether name (a subtest's name as go test prints it,
// spaces as '_') is a concatenation of one or more of lits: a literal
// ("starved") or a name built from literals (knob + "_in_shapes").
func composed(name string, lits []string) bool {
	ok := make([]bool, len(name)+1) // ok[i]: name[:i] is composed
	ok[0] = true
	for i := range len(name) {
		if !ok[i] {
			continue
		}
		for _, l := range lits {
			if l = strings.ReplaceAll(l, " ", "_"); l != "" && strings.HasPrefix(name[i:], l) {
				ok[i+len(l)] = true
			}
		}
	}
	return ok[len(name)]
}

// missingPaths returns the repository paths cited as inline code in doc
// (a document in dir) that exist neither from the repository root nor from
// dir, and that the root .gitignore does not list by name (a generated
// file). Globs must match at least one file.
func missingPaths(doc, root, dir string) []string {
	ignored := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			ignored[strings.TrimPrefix(strings.TrimSpace(line), "/")] = true
		}
	}
	var missing []string
	for _, m := range inBackticks.FindAllStringSubmatch(doc, -1) {
		p := m[1]
		if !strings.Contains(strings.TrimSuffix(p, "/"), "/") || !pathLike.MatchString(p) {
			continue
		}
		found := ignored[p]
		for _, base := range []string{root, dir} {
			if matches, _ := filepath.Glob(filepath.Join(base, filepath.FromSlash(p))); len(matches) > 0 {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, p)
		}
	}
	return missing
}

// TestDocsCiteWhatExists keeps README.md and docs/*.md honest: every test,
// benchmark, example or fuzz function they name exists in the repository's
// _test.go files (both modules; a subtest's name must appear in the file),
// and every repository path they quote as inline code (with a '/' and an
// extension, or a trailing '/') exists.
func TestDocsCiteWhatExists(t *testing.T) {
	funcs := testFuncs(t)
	if _, ok := funcs["TestDocsCiteWhatExists"]; !ok {
		t.Fatal("the scan found no test functions: wrong repository root?")
	}
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, file)
		for _, name := range missingTestNames(string(b), funcs) {
			t.Errorf("%s cites %s: no such function in any _test.go file", rel, name)
		}
		for _, p := range missingPaths(string(b), repoRoot, filepath.Dir(file)) {
			t.Errorf("%s cites path %s: not in the repository", rel, p)
		}
	}

	// The checks themselves: a cited name that is removed, a subtest or a
	// path that does not exist, is reported; prose and a document's own
	// functions are not.
	t.Run("fake doc", func(t *testing.T) {
		doc := "Tested by `TestDocsCiteWhatExists` and `TestGoneSinceTheRename`;\n" +
			"`TestDocsCiteWhatExists/fake_doc` and `TestDocsCiteWhatExists/no_such_case`.\n" +
			"Tests and Examples run; see `redlock/lease.go`, `node/redisnode/scripts/`,\n" +
			"`redlock/*_test.go`, `redlock/gone.go` and `docs/nowhere/`.\n" +
			"```go\nfunc TestMine(t *testing.T) {}\n```\nRun TestMine. Example: `Example`, `ExampleGone`.\n"
		assert := func(got, want []string) {
			t.Helper()
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		}
		assert(missingTestNames(doc, funcs), []string{"TestGoneSinceTheRename", "TestDocsCiteWhatExists/no_such_case", "ExampleGone"})
		assert(missingPaths(doc, repoRoot, filepath.Join(repoRoot, "docs")), []string{"redlock/gone.go", "docs/nowhere/"})
		// Removing a function makes its citation fail.
		without := map[string][]string{}
		for k, v := range funcs {
			if k != "TestDocsCiteWhatExists" {
				without[k] = v
			}
		}
		assert(missingTestNames("see `TestDocsCiteWhatExists`", without), []string{"TestDocsCiteWhatExists"})
	})
}

// TestDocsListEveryScript: docs/nodes.md names every script redisnode
// embeds (it once said three while there were eight).
func TestDocsListEveryScript(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "nodes.md"))
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := filepath.Glob(filepath.Join(repoRoot, "node", "redisnode", "scripts", "*.lua"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	for _, s := range scripts {
		if !strings.Contains(string(b), "`"+filepath.Base(s)+"`") {
			t.Errorf("docs/nodes.md does not name %s", filepath.Base(s))
		}
	}
}

// quickStartBlock returns the Go code block of the README's "Quick start"
// section without its import block.
func quickStartBlock(readme, section string) (string, bool) {
	_, body, ok := strings.Cut(readme, "\n## "+section+"\n")
	if !ok {
		return "", false
	}
	if next := strings.Index(body, "\n## "); next >= 0 {
		body = body[:next]
	}
	_, block, ok := strings.Cut(body, "```go\n")
	if !ok {
		return "", false
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		return "", false
	}
	if strings.HasPrefix(block, "import (") {
		_, block, _ = strings.Cut(block, "\n)\n")
	}
	return strings.TrimLeft(block, "\n"), true
}

// funcBody returns the body of the function name in the Go source src,
// without its braces and with one level of indentation removed.
func funcBody(t *testing.T, src, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name {
			body := src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
			lines := strings.Split(strings.Trim(body, "\n"), "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, "\t")
			}
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no func %s", name)
	return ""
}

// nodesPart is the start of the quick start that builds the nodes, up to
// and including the line that makes the client from them.
var nodesPart = regexp.MustCompile(`(?s)^.*?redlock\.New\([^\n]*\n`)

// TestReadmeQuickStartIsTheExample: the README's quick start is the body of
// quickStart (run by Example), line for line, except for the lines that
// build the nodes: the README dials real masters with redisnode.DialAll,
// the example makes in-memory ones with memnode.New so that it runs
// anywhere (TestReadmeQuickStartRunsOnRealServers runs the README's own).
func TestReadmeQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ section, fn string }{
		{"A first lock", "firstLock"},
		{"Quick start", "quickStart"},
	} {
		block, ok := quickStartBlock(string(readme), tc.section)
		if !ok {
			t.Fatalf("README.md has no Go block under \"## %s\"", tc.section)
		}
		body := funcBody(t, string(src), tc.fn) + "\n"
		readmeLoop, exampleLoop := nodesPart.FindString(block), nodesPart.FindString(body)
		if !strings.Contains(readmeLoop, "redisnode.DialAll(") {
			t.Fatalf("the README's %q does not open by dialing the nodes with redisnode.DialAll:\n%s", tc.section, block)
		}
		if !strings.Contains(exampleLoop, "memnode.New(") {
			t.Fatalf("%s does not open by making the nodes with memnode.New:\n%s", tc.fn, body)
		}
		readmeRest, exampleRest := block[len(readmeLoop):]+"\n", body[len(exampleLoop):]
		if readmeRest != exampleRest {
			rl, el := strings.Split(readmeRest, "\n"), strings.Split(exampleRest, "\n")
			for i := range min(len(rl), len(el)) {
				if rl[i] != el[i] {
					t.Fatalf("the README's %q differs from %s in redlock/example_test.go after the node loop, line %d:\nREADME:  %q\nexample: %q", tc.section, tc.fn, i+1, rl[i], el[i])
				}
			}
			t.Fatalf("the README's %q and %s differ in length: %d and %d lines after the node loop", tc.section, tc.fn, len(rl), len(el))
		}
	}
}

// privateCitation matches what a reader of the repository cannot follow:
// the project's issue numbers and its engineers' field notes.
var privateCitation = regexp.MustCompile(`(?i)\bissue #?\d+|\bfield notes\b`)

// TestDocsCiteNothingPrivate: the README and docs/ cite no issue numbers
// and no field notes; they say what was found instead.
func TestDocsCiteNothingPrivate(t *testing.T) {
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := privateCitation.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader cannot follow", doc, i+1, m)
			}
		}
	}
	if privateCitation.FindString("as issue 12 found") == "" || privateCitation.FindString("see the Field Notes") == "" {
		t.Error("the check no longer matches what it is for")
	}
}
