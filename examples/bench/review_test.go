package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The table bench prints is a Markdown table: its delimiter row has as
// many cells as its header (GitHub renders no table otherwise), and so
// does every row.
func TestReviewTableDelimiterMatchesHeader(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-duration", "100ms", "-clients", "1", "-rounds", "1", "-mysql", "none"}, &out, &errb); code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	head := len(cells(lines[0]))
	for i, l := range lines {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		if n := len(cells(l)); n != head {
			t.Errorf("line %d has %d cells, the header %d: %s", i+1, n, head, l)
		}
	}
}

// The README's tables (the bench table among them) have a delimiter row
// of as many cells as their header.
func TestReviewReadmeTablesDelimiterMatchesHeader(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "|---") || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "|") {
			continue
		}
		if h, d := len(cells(lines[i-1])), len(cells(l)); h != d {
			t.Errorf("README.md:%d: the delimiter row has %d cells, the header %d: %s", i+1, d, h, strings.TrimSpace(lines[i-1]))
		}
	}
}
