package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// libraryPath is the module of the stockguard library stockctl is built on.
const libraryPath = "github.com/stockguard/stockguard"

var versionCommand = command{
	name:     "version",
	synopsis: "version",
	summary:  "print stockctl's version and the storage layouts it reads and writes (also --version)",
	reach:    nothing,
	help: `Prints stockctl's module version (as 'go version -m' reads it; "(devel)"
for a build from a work tree), the stockguard library it is built on, and
what it reads and writes: the Redis gate's key layout (redisstock.Layout)
and the record's tables (sqlstock.Schema of this version). The layouts
change between minor versions: run a stockctl of the shop's own version.
Connects to nothing.
`,
	setup: func(*flag.FlagSet) func([]string) (work, error) {
		return func(args []string) (work, error) {
			if len(args) != 0 {
				return nil, fmt.Errorf("version takes no arguments, not %q", args[0])
			}
			return func(_ context.Context, s *session) error {
				bi, ok := debug.ReadBuildInfo()
				return printVersion(s, buildOf(bi, ok))
			}, nil
		}
	},
}

// build is what a binary knows of how it was built.
type build struct {
	Version  string `json:"version"`            // stockctl's module version, or "(devel)"
	Library  string `json:"library"`            // the stockguard library's version
	Go       string `json:"go,omitempty"`       // the toolchain
	Revision string `json:"revision,omitempty"` // the VCS revision of a work-tree build
	Modified bool   `json:"modified,omitempty"` // ... with uncommitted changes
}

// buildOf reads the build information: stockctl's module is the
// library's own, or a module of its own that requires the library.
func buildOf(bi *debug.BuildInfo, ok bool) build {
	b := build{Version: "(devel)", Library: "(devel)"}
	if !ok || bi == nil {
		return b
	}
	b.Go = bi.GoVersion
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if bi.Main.Path == libraryPath || bi.Main.Path == "" {
		b.Library = b.Version
	}
	for _, m := range bi.Deps {
		if m.Path != libraryPath {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version != "" {
			b.Library = m.Version
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// printVersion prints b and the storage layouts, with the shop's table
// names (--table, --ledger).
func printVersion(s *session, b build) error {
	ledger := s.opts.ledger
	tables := []string{s.opts.table, ledger, ledger + "_ops", ledger + "_returns"}
	if s.opts.json {
		return writeJSON(s.out, struct {
			build
			RedisLayout int      `json:"redis_key_layout"`
			Tables      []string `json:"sql_tables"`
		}{b, redisstock.Layout, tables})
	}
	built := b.Go
	if b.Revision != "" {
		built += ", revision " + b.Revision
		if b.Modified {
			built += " (modified)"
		}
	}
	fmt.Fprintf(s.out, "stockctl  %s\nlibrary   %s %s\n", b.Version, libraryPath, b.Library)
	if built != "" {
		fmt.Fprintf(s.out, "built     %s\n", built)
	}
	fmt.Fprintf(s.out, "gate      Redis key layout %d (redisstock.Layout): per-SKU and per-shard hashes, no key per order;\n"+
		"          a prefix of an earlier layout is refused until redisstock's Store.Migrate\n", redisstock.Layout)
	fmt.Fprintf(s.out, "record    SQL tables of this version (sqlstock.Schema): %s;\n"+
		"          tables of an earlier version lack the returns table and the max hold, returned and\n"+
		"          bound_ms columns: 'stockctl init' adds them\n", strings.Join(tables, ", "))
	return nil
}
