package main

import (
	"strings"
	"testing"
)

func TestParseVersions(t *testing.T) {
	rs, err := parseVersions("# modules\n.  v0.2.0\notelstock v0.2.0 # adapter\n\ninternal/modproxy -\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []release{{".", "v0.2.0"}, {"otelstock", "v0.2.0"}, {"internal/modproxy", ""}}
	if len(rs) != len(want) {
		t.Fatalf("got %v, want %v", rs, want)
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Fatalf("line %d: got %v, want %v", i, rs[i], want[i])
		}
	}
	for _, bad := range []string{"", ". v0.2\n", ". v0.2.0\n. v0.3.0\n", "../x v0.2.0\n", ". v0.2.0 extra\n", ". v0.2.0+build\n"} {
		if _, err := parseVersions(bad); err == nil {
			t.Errorf("parseVersions(%q) accepted", bad)
		}
	}
}

const core = "module github.com/stockguard/stockguard\n\ngo 1.26.0\n"

func TestCheckModules(t *testing.T) {
	releases := []release{{".", "v0.2.0"}, {"otelstock", "v0.2.0"}, {"internal/modproxy", ""}}
	good := map[string][]byte{
		".":                 []byte(core),
		"otelstock":         []byte("module github.com/stockguard/stockguard/otelstock\n\ngo 1.26.0\n\nrequire github.com/stockguard/stockguard v0.2.0\n"),
		"internal/modproxy": []byte("module github.com/stockguard/stockguard/internal/modproxy\n\ngo 1.26.0\n\nrequire golang.org/x/mod v0.43.0\n"),
	}
	if err := checkModules(releases, good); err != nil {
		t.Fatalf("good layout refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		mod  string
		want string
	}{
		{"placeholder", "otelstock", "module github.com/stockguard/stockguard/otelstock\n\nrequire github.com/stockguard/stockguard v0.0.0-00010101000000-000000000000\n", "versions file gives v0.2.0"},
		{"replace", "otelstock", "module github.com/stockguard/stockguard/otelstock\n\nrequire github.com/stockguard/stockguard v0.2.0\n\nreplace github.com/stockguard/stockguard => ../\n", "joined by go.work"},
		{"unlisted", "examples/basic", "module github.com/stockguard/stockguard/examples/basic\n", "not listed"},
		{"unpublished", "otelstock", "module github.com/stockguard/stockguard/otelstock\n\nrequire github.com/stockguard/stockguard/internal/modproxy v0.2.0\n", "never published"},
		{"unknown", "otelstock", "module github.com/stockguard/stockguard/otelstock\n\nrequire github.com/stockguard/stockguard/gone v0.2.0\n", "no module of the versions file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := map[string][]byte{}
			for k, v := range good {
				mods[k] = v
			}
			mods[tc.dir] = []byte(tc.mod)
			err := checkModules(releases, mods)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	delete(good, "otelstock")
	if err := checkModules(releases, good); err == nil || !strings.Contains(err.Error(), "has no go.mod") {
		t.Fatalf("missing go.mod: got %v", err)
	}
}

func TestCheckWork(t *testing.T) {
	releases := []release{{".", "v0.2.0"}, {"otelstock", "v0.2.0"}, {"internal/modproxy", ""}}
	mods := map[string][]byte{
		".":                 []byte(core),
		"otelstock":         []byte("module github.com/stockguard/stockguard/otelstock\n\nrequire github.com/stockguard/stockguard v0.2.0\n"),
		"internal/modproxy": []byte("module github.com/stockguard/stockguard/internal/modproxy\n"),
	}
	const use = "go 1.26.0\n\nuse (\n\t.\n\t./otelstock\n\t./internal/modproxy\n)\n"
	if err := checkWork(releases, mods, []byte(use+"\nreplace github.com/stockguard/stockguard v0.2.0 => ./\n")); err != nil {
		t.Fatalf("good go.work refused: %v", err)
	}
	for _, tc := range []struct{ name, work, want string }{
		{"no replace", use, "want replace github.com/stockguard/stockguard v0.2.0 => ./."},
		{"old version", use + "\nreplace github.com/stockguard/stockguard v0.1.0 => ./\n", "want replace"},
		{"unversioned", use + "\nreplace github.com/stockguard/stockguard => ./\n", "want replace"},
		{"elsewhere", use + "\nreplace github.com/stockguard/stockguard v0.2.0 => ../fork\n", "want replace"},
		{"third party", use + "\nreplace github.com/stockguard/stockguard v0.2.0 => ./\nreplace golang.org/x/mod => ../mod\n", "not a module of the repository"},
		{"not used", "go 1.26.0\n\nuse .\n\nreplace github.com/stockguard/stockguard v0.2.0 => ./\n", "does not use otelstock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWork(releases, mods, []byte(tc.work))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
