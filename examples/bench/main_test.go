package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"-clients", "0"}, {"-clients", "x"}, {"-duration", "1ms"}, {"extra"}, {"-nope"}} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

func TestEmbeddedTable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-duration", "100ms", "-clients", "2"}, &out, &errb); code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Header, separator, 4 Redis cases and 8 SQLite cases.
	if len(lines) != 14 {
		t.Fatalf("table has %d lines, want 14:\n%s", len(lines), out.String())
	}
	if got := strings.Count(out.String(), "| baseline |"); got != 2 {
		t.Errorf("%d baselines in the table, want 2", got)
	}
	for _, l := range lines[2:] {
		if strings.Contains(l, "| 0 |") {
			t.Errorf("a case made no progress: %s", l)
		}
	}
}
