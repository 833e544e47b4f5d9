package main

import (
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/stock/redisstock"
)

func TestVersion(t *testing.T) {
	s := &shop{t: t}
	layout := "Redis key layout " + strconv.Itoa(redisstock.Layout) + " (redisstock.Layout)"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"--version", "inspect", "x"}} {
		s.runRaw(args...).prints(t, "stockctl  ", "library   "+libraryPath+" ", layout,
			"stock, stockguard_ledger, stockguard_ledger_ops, stockguard_ledger_returns", "'stockctl init' adds them")
	}
	// It connects to nothing, and names the shop's tables.
	s.runRaw("--redis", "127.0.0.1:1", "--dsn", "/nowhere/shop.db", "--ledger", "shop_ledger", "version").
		prints(t, "stock, shop_ledger, shop_ledger_ops, shop_ledger_returns")

	var got struct {
		build
		RedisLayout int      `json:"redis_key_layout"`
		Tables      []string `json:"sql_tables"`
	}
	for _, args := range [][]string{{"version", "-json"}, {"--version", "--json"}} {
		r := s.runRaw(args...)
		r.prints(t)
		r.decode(t, &got)
		if got.RedisLayout != redisstock.Layout || got.Version == "" || got.Library == "" ||
			!slices.Equal(got.Tables, []string{"stock", "stockguard_ledger", "stockguard_ledger_ops", "stockguard_ledger_returns"}) {
			t.Errorf("stockctl %v: %+v", args, got)
		}
	}
	s.runRaw("version", "now").exits(t, exitUsage, `version takes no arguments, not "now"`)
}

func TestBuildOf(t *testing.T) {
	lib := func(v string) *debug.Module { return &debug.Module{Path: libraryPath, Version: v} }
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		want build
	}{
		{"no build information", nil, build{Version: "(devel)", Library: "(devel)"}},
		{"a work tree of the library", &debug.BuildInfo{GoVersion: "go1.26.0",
			Main:     debug.Module{Path: libraryPath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			build{Version: "(devel)", Library: "(devel)", Go: "go1.26.0", Revision: "abc123", Modified: true}},
		{"go install of the library at a version", &debug.BuildInfo{GoVersion: "go1.26.0",
			Main: debug.Module{Path: libraryPath, Version: "v0.9.0"}},
			build{Version: "v0.9.0", Library: "v0.9.0", Go: "go1.26.0"}},
		{"stockctl's own module", &debug.BuildInfo{GoVersion: "go1.26.0",
			Main: debug.Module{Path: libraryPath + "/cmd/stockctl", Version: "v0.9.1"},
			Deps: []*debug.Module{{Path: "github.com/redis/go-redis/v9", Version: "v9.0.0"}, lib("v0.9.0")}},
			build{Version: "v0.9.1", Library: "v0.9.0", Go: "go1.26.0"}},
		{"a library replaced by a directory", &debug.BuildInfo{
			Main: debug.Module{Path: libraryPath + "/cmd/stockctl", Version: "(devel)"},
			Deps: []*debug.Module{{Path: libraryPath, Version: "v0.9.0", Replace: &debug.Module{Path: "../.."}}}},
			build{Version: "(devel)", Library: "(devel)"}},
		{"a replaced library at a version", &debug.BuildInfo{
			Main: debug.Module{Path: libraryPath + "/cmd/stockctl"},
			Deps: []*debug.Module{{Path: libraryPath, Version: "v0.9.0", Replace: lib("v0.9.2")}}},
			build{Version: "(devel)", Library: "v0.9.2"}},
	} {
		if got := buildOf(c.bi, c.bi != nil); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The completion script is bash, and completes commands, their flags and
// the kinds of database.
func TestCompletion(t *testing.T) {
	s := &shop{t: t}
	r := s.runRaw("completion", "bash")
	r.prints(t, "complete -o default -F _stockctl stockctl")
	s.runRaw("completion", "fish").exits(t, exitUsage, "want 'completion bash'")
	s.runRaw("completion").exits(t, exitUsage, "want 'completion bash'")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the script")
	}
	for _, c := range []struct {
		words string // the command line, the last word being completed
		want  string
	}{
		{"stockctl ", strings.Join(commandNames(), " ") + " help"},
		{"stockctl in", "inspect init"},
		{"stockctl --db p", "postgres"},
		{"stockctl schema -dialect m", "mysql mariadb"},
		{"stockctl put-on-sale phone 3 --l", "--ledger --limit"},
		{"stockctl --dsn x.db reconcile --d", "--db --dsn --dry-run"},
		{"stockctl --t", "--table --timeout"},
		{"stockctl help re", "reconcile restock"},
		{"stockctl completion ", "bash"},
	} {
		script := r.out + `
COMP_WORDS=(` + c.words + `)
[[ "` + c.words + `" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_stockctl
echo "${COMPREPLY[*]}"
`
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.words, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("%q completes to %q, want %q", c.words, got, c.want)
		}
	}
}
