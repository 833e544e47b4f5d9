package stockguard_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's first code block is the package's Example: from the Shop's
// constructor on, each of its lines stands in Example, in order (the two
// lines before it open a Redis server's client and a database, which
// Example opens on miniredis and SQLite instead). Both open the database
// with database/sql's sql.Open, whose *sql.DB New takes.
func TestREADMEFirstBlockIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no go block")
	}
	block, _, _ = strings.Cut(block, "```")
	opening, block, ok := strings.Cut(block, "shop, err := stockguard.New(")
	if !ok {
		t.Fatal("README.md's first go block does not build a stockguard.Shop")
	}
	const open = "db, err := sql.Open("
	if !strings.Contains(opening, open) || !strings.Contains(string(example), open) {
		t.Fatalf("README.md's first go block and Example must open the database with %q", open)
	}
	lines := strings.Split("shop, err := stockguard.New("+block, "\n")
	rest := string(example)
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		i := strings.Index(rest, l)
		if i < 0 {
			t.Fatalf("README.md's line %q is not in Example (after the lines before it)", l)
		}
		rest = rest[i+len(l):]
	}
}

// The README's blocks that go on with the first block's shop (they call
// shop's methods and do not build one) compile as written, each in a
// function that has ctx, shop and items (every name a block declares is
// used after it, as the rest of a program would).
func TestREADMEShopBlocksCompile(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString("package readmeblocks\n\nimport (\n\t\"context\"\n\t\"time\"\n\n\t\"github.com/stockguard/stockguard\"\n\t\"github.com/stockguard/stockguard/stock\"\n)\n\nvar _ = time.Second\n")
	n := 0
	for rest := string(readme); ; {
		var block string
		var ok bool
		if _, rest, ok = strings.Cut(rest, "```go\n"); !ok {
			break
		}
		block, rest, _ = strings.Cut(rest, "```")
		if !strings.Contains(block, "shop.") || strings.Contains(block, "stockguard.New(") {
			continue
		}
		n++
		body := "{\n" + block + "}"
		f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc f()"+body, 0)
		if err != nil {
			t.Fatalf("README block %d does not parse: %v\n%s", n, err, block)
		}
		var uses strings.Builder
		for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
			if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
				for _, e := range as.Lhs {
					if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
						fmt.Fprintf(&uses, "\t_ = %s\n", id.Name)
					}
				}
			}
		}
		fmt.Fprintf(&src, "\nfunc block%d(ctx context.Context, shop *stockguard.Shop, items []stock.Item) {\n%s%s}\n", n, block, uses.String())
	}
	if n < 2 {
		t.Fatalf("README.md has %d blocks on the shop; want the returns and the holds blocks at least", n)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "blocks.go")
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(wd, "internal", "readmeblocks", "blocks.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./internal/readmeblocks").CombinedOutput(); err != nil {
		t.Fatalf("README.md's blocks on the shop do not compile:\n%s\n%s", src.String(), out)
	}
}
