// Package lua holds stockguard's Redis scripts, one per file. Each file
// starts with a header naming its KEYS, ARGV and reply. Packages wrap a
// script once in a package-level redis.NewScript and call it with Run
// (EVALSHA, falling back to EVAL on NOSCRIPT).
//
// Every key a script touches is passed in KEYS. All the keys of a script
// share one hash tag, so it is legal on Redis Cluster, with one deliberate
// exception that says so in its header: stock_deduct_batch.lua, which
// redisstock runs only on a single server (no hash slots), where it binds an
// order's directory entry and takes its lines in one call.
package lua

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Source returns the text of the named script, e.g. "stock_deduct.lua". The
// scripts are compiled into the binary, so a missing name is a programming
// error and Source panics.
func Source(name string) string {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		panic("lua: no embedded script " + name)
	}
	return string(b)
}

// Script returns the text to send for the named script: its Source, with
// stock_lib.lua before it when its header says it "Runs after
// stock_lib.lua" (the codec of the gate's per-order data, which the stock
// scripts share; it defines local functions only).
func Script(name string) string {
	src := Source(name)
	if strings.Contains(src, "Runs after stock_lib.lua") {
		return Source("stock_lib.lua") + "\n" + src
	}
	return src
}

// Names lists the embedded scripts.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
