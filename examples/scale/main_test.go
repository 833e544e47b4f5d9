package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"-clients", "0"}, {"-clients", "x"}, {"-duration", "1ms"}, {"-units", "1"},
		{"-check-port", "7000"}, {"-check-port", "6378"}, {"-cluster", "a,,b"}, {"extra"}, {"-nope"}} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// TestEmbedded runs every measurement on the in-process miniredis
// servers posing as three masters.
func TestEmbedded(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-duration", "100ms", "-clients", "4", "-units", "30"}, &out, &errb); code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"### 1.", "### 2.", "### 3.", "### 4.",
		"gate calls: PASS: one master takes all",
		"| 30 | 3 | 30 | 4 | 0 | 30 | PASS |"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// With B=3 every master holds one bucket state and takes orders.
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "| 3 | 127.0.0.1:") {
			f := strings.Split(l, "|")
			if strings.TrimSpace(f[3]) != "1" || strings.TrimSpace(f[9]) == "0" {
				t.Errorf("B=3 row without its bucket or its orders: %s", l)
			}
		}
	}
}
