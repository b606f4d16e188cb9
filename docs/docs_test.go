package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/internal/markdown"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// markdownFiles are the files the documentation tests read, relative to
// the root: the README, the top-level pointer to reliability, and every
// page of docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "RELIABILITY.md"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(filepath.Join("docs", path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// snippet is a Go block of a Markdown file.
type snippet struct {
	file string // relative to the root
	markdown.Block
}

// goSnippets returns the Go blocks of files.
func goSnippets(t *testing.T, files []string) []snippet {
	t.Helper()
	var out []snippet
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range markdown.Blocks(src) {
			if b.Lang == "go" {
				out = append(out, snippet{file: f, Block: b})
			}
		}
	}
	return out
}

// exampleDirective marks a Go block that shows an example function:
// "<!-- example: <file from the root> <function> -->".
const exampleDirective = "example:"

// TestGoSnippetsCompile builds every Go block of the README and docs/
// that does not show an example (those are TestExamplesAreTheirSource's).
func TestGoSnippetsCompile(t *testing.T) {
	t.Parallel()
	var build []snippet
	for _, s := range goSnippets(t, markdownFiles(t)) {
		if !strings.HasPrefix(s.Directive, exampleDirective) {
			build = append(build, s)
		}
	}
	if len(build) == 0 {
		t.Fatal("no Go block found: the test reads nothing")
	}
	if err := buildSnippets(t, build); err != nil {
		t.Error(err)
	}
}

// TestABrokenSnippetFails: the check fails on a block that does not
// compile, a block of statements outside a function, and an unused import,
// naming the Markdown file and line.
func TestABrokenSnippetFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code string
		want string
	}{
		{"undefined name", "func f() error {\n\treturn undefinedThing()\n}\n", "x.md:11:"},
		{"statements", "x := 1\n_ = x\n", "x.md:10: not a Go file or top-level declarations"},
		{"wrong type", "func f() int {\n\treturn strings.ToUpper(\"a\")\n}\n", "x.md:11:"},
		{"whole file, unused import", "package main\n\nimport \"os\"\n\nfunc main() {}\n", "x.md:12:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := buildSnippets(t, []snippet{{file: "x.md", Block: markdown.Block{Lang: "go", Line: 10, Code: tt.code}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("building %q: %v, want an error with %q", tt.code, err, tt.want)
			}
		})
	}
	// And a good one passes.
	good := snippet{file: "x.md", Block: markdown.Block{Lang: "go", Line: 1, Code: "func f() string {\n\treturn strings.ToUpper(\"a\")\n}\n"}}
	if err := buildSnippets(t, []snippet{good}); err != nil {
		t.Errorf("a block that compiles: %v", err)
	}
}

// imports are the packages a block may use without importing them: the
// check adds the import of each one the block names and does not declare.
var imports = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"hex":      "encoding/hex",
	"hmac":     "crypto/hmac",
	"http":     "net/http",
	"io":       "io",
	"json":     "encoding/json",
	"log":      "log",
	"math":     "math",
	"os":       "os",
	"sha256":   "crypto/sha256",
	"signal":   "os/signal",
	"slog":     "log/slog",
	"strconv":  "strconv",
	"strings":  "strings",
	"syscall":  "syscall",
	"time":     "time",
	"pgx":      "github.com/jackc/pgx/v5",
	"pgconn":   "github.com/jackc/pgx/v5/pgconn",
	"pgxpool":  "github.com/jackc/pgx/v5/pgxpool",
	"consume":  "github.com/burnpoller/burnpoller/consume",
	"payments": "github.com/burnpoller/burnpoller/payments",
	"webhooks": "github.com/burnpoller/burnpoller/webhooks",
}

// buildSnippets compiles each snippet as a package of its own inside this
// module (through an overlay: nothing is written into the tree), and
// returns the compiler's errors at the Markdown files' lines.
//
// A block that begins with a package clause is a whole file. Any other
// block holds top-level declarations (functions, types, variables): it is
// put in a package of its own, with an import for each package of the
// imports table it uses. Statements outside a function are refused: a
// block shows them inside a function whose parameters declare what they
// use.
func buildSnippets(t *testing.T, snippets []snippet) error {
	t.Helper()
	tmp := t.TempDir()
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	overlay := map[string]string{}
	var pkgs []string
	var problems []error
	for i, s := range snippets {
		src, err := snippetFile(s, filepath.Join(absRoot, filepath.FromSlash(s.file)))
		if err != nil {
			problems = append(problems, err)
			continue
		}
		// A directory of this package's that does not exist: the overlay
		// makes the go command see the file there.
		dir := fmt.Sprintf("snippets_of_docs/s%03d", i)
		name := filepath.Join(tmp, fmt.Sprintf("s%03d.go", i))
		if err := os.WriteFile(name, src, 0o600); err != nil {
			return err
		}
		abs, err := filepath.Abs(filepath.Join(dir, "snippet.go"))
		if err != nil {
			return err
		}
		overlay[abs] = name
		pkgs = append(pkgs, "./"+dir)
	}
	if len(pkgs) > 0 {
		if err := goBuild(t, tmp, overlay, pkgs); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// snippetFile makes the Go file that compiles s, with a line directive so
// that the compiler's errors name the Markdown file and line (abs).
func snippetFile(s snippet, abs string) ([]byte, error) {
	directive := fmt.Sprintf("//line %s:%d\n", abs, s.Line)
	fset := token.NewFileSet()
	if f, err := parser.ParseFile(fset, "", s.Code, parser.PackageClauseOnly); err == nil && f.Name != nil {
		return []byte(directive + s.Code), nil
	}
	f, err := parser.ParseFile(fset, "", "package snippet\n"+s.Code, parser.ParseComments)
	if err != nil {
		line := s.Line
		var list scanner.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			line += list[0].Pos.Line - 2 // the package clause is line 1
			err = errors.New(list[0].Msg)
		}
		return nil, fmt.Errorf("%s:%d: not a Go file or top-level declarations (put statements in a function): %w", s.file, line, err)
	}
	var b bytes.Buffer
	b.WriteString("package snippet\n\n")
	for _, path := range missingImports(f) {
		fmt.Fprintf(&b, "import %q\n", path)
	}
	b.WriteString(directive)
	b.WriteString(s.Code)
	return b.Bytes(), nil
}

// missingImports returns the import paths of the packages of the imports
// table that f uses as pkg.Name without importing or declaring pkg.
func missingImports(f *ast.File) []string {
	declared := map[string]bool{}
	for _, spec := range f.Imports {
		p := strings.Trim(spec.Path.Value, `"`)
		name := p[strings.LastIndex(p, "/")+1:]
		if spec.Name != nil {
			name = spec.Name.Name
		}
		declared[name] = true
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		for _, id := range declares(n) {
			declared[id.Name] = true
		}
		return true
	})
	var paths []string
	for name := range used {
		if p, ok := imports[name]; ok && !declared[name] {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// declares returns the names n declares: a package name they shadow is not
// the package's.
func declares(n ast.Node) []*ast.Ident {
	switch n := n.(type) {
	case *ast.FuncDecl:
		return []*ast.Ident{n.Name}
	case *ast.Field:
		return n.Names
	case *ast.ValueSpec:
		return n.Names
	case *ast.TypeSpec:
		return []*ast.Ident{n.Name}
	case *ast.AssignStmt:
		if n.Tok == token.DEFINE {
			return idents(n.Lhs...)
		}
	case *ast.RangeStmt:
		if n.Tok == token.DEFINE {
			return idents(n.Key, n.Value)
		}
	}
	return nil
}

// idents returns the identifiers among exprs.
func idents(exprs ...ast.Expr) []*ast.Ident {
	var out []*ast.Ident
	for _, e := range exprs {
		if id, ok := e.(*ast.Ident); ok {
			out = append(out, id)
		}
	}
	return out
}

// goBuild runs go build on pkgs with overlay, discarding what it builds
// (-o /dev/null: a main package among them is linked, and dropped).
func goBuild(t *testing.T, tmp string, overlay map[string]string, pkgs []string) error {
	t.Helper()
	var o strings.Builder
	o.WriteString(`{"Replace":{`)
	first := true
	for k, v := range overlay {
		if !first {
			o.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&o, "%q:%q", k, v)
	}
	o.WriteString("}}")
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, []byte(o.String()), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-overlay", ov, "-o", os.DevNull}, pkgs...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("a Go block of the docs does not compile:\n%s", relativeTo(b))
	}
	return nil
}

// relativeTo shortens the absolute paths of the Markdown files in the go
// command's output to paths from the root.
func relativeTo(out []byte) string {
	abs, err := filepath.Abs(root)
	if err != nil {
		return string(out)
	}
	return strings.ReplaceAll(string(out), abs+string(filepath.Separator), "")
}

// TestExamplesAreTheirSource: a Go block marked
// "<!-- example: <file> <function> -->" is exactly that function's source,
// its doc comment included; the function itself is compiled, and run when
// it has an Output comment, by go test in its package.
func TestExamplesAreTheirSource(t *testing.T) {
	t.Parallel()
	n := 0
	for _, s := range goSnippets(t, markdownFiles(t)) {
		if !strings.HasPrefix(s.Directive, exampleDirective) {
			continue
		}
		n++
		fields := strings.Fields(strings.TrimPrefix(s.Directive, exampleDirective))
		if len(fields) != 2 {
			t.Errorf("%s:%d: want <!-- example: <file> <function> -->, have <!-- %s -->", s.file, s.Line-1, s.Directive)
			continue
		}
		src, err := funcSource(filepath.Join(root, filepath.FromSlash(fields[0])), fields[1])
		if err != nil {
			t.Errorf("%s:%d: %v", s.file, s.Line-1, err)
			continue
		}
		if strings.TrimSpace(s.Code) != strings.TrimSpace(src) {
			t.Errorf("%s:%d: the block is not the source of %s in %s; copy it again:\n%s", s.file, s.Line, fields[1], fields[0], src)
		}
	}
	if n == 0 {
		t.Fatal("no block shows an example: the test reads nothing")
	}
}

// funcSource returns the source of the top-level function name in file,
// from its doc comment to its closing brace.
func funcSource(file, name string) (string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return "", err
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Name.Name != name {
			continue
		}
		start := fd.Pos()
		if fd.Doc != nil {
			start = fd.Doc.Pos()
		}
		return string(src[fset.Position(start).Offset:fset.Position(fd.End()).Offset]), nil
	}
	return "", fmt.Errorf("%s has no function %s", file, name)
}

// external are link targets not checked: other sites.
var external = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

// TestLinksResolve: every relative link of the README and docs/ names a
// file or directory that exists, and every anchor a heading of its page.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string]map[string]bool{}
	for _, f := range markdownFiles(t) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdown.Links(src) {
			if err := checkLink(f, l.Target, anchors); err != nil {
				t.Errorf("%s:%d: %s: %v", f, l.Line, l.Target, err)
			}
		}
	}
}

// checkLink checks target, a link of file f (both from the root): the file
// it names exists and, if it names an anchor, the file has that heading.
// anchors caches the anchors of the files read.
func checkLink(f, target string, anchors map[string]map[string]bool) error {
	if external.MatchString(target) {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := f
	if path != "" {
		file = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
		if strings.HasPrefix(file, "../") {
			return errors.New("leaves the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			return errors.New("no such file")
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return errors.New("an anchor in a file that is not Markdown")
	}
	if anchors[file] == nil {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return err
		}
		anchors[file] = markdown.Anchors(src)
	}
	if !anchors[file][anchor] {
		return fmt.Errorf("%s has no heading #%s", file, anchor)
	}
	return nil
}
