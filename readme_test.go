package stockguard_test

import (
	"os"
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
