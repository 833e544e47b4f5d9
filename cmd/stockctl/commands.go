package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// command is one of stockctl's commands.
type command struct {
	name     string
	synopsis string // e.g. "holds SKU [--max N]"
	summary  string // one line for the program's usage text
	help     string // the rest of 'stockctl COMMAND -h'
	reach    reach  // what the command connects to
	// setup registers the command's own flags on fs and returns the
	// function that checks the positional arguments once fs is parsed and
	// returns the command's work. Nothing is connected before both pass.
	setup func(fs *flag.FlagSet) func(args []string) (work, error)
}

// work is a command, ready to run on a connected session.
type work func(ctx context.Context, s *session) error

// reach is what a command connects to before its work runs.
type reach int

const (
	// gateAndRecord: Redis and the database, whose tables must be there.
	gateAndRecord reach = iota
	// recordOnly: the database alone, whose tables the command makes
	// (init): they are not checked first.
	recordOnly
	// nothing: the command prints what stockctl knows (version, schema);
	// its session has no stores.
	nothing
)

// commands are stockctl's commands, in the order the usage text lists them.
var commands []command

func init() {
	commands = []command{inspectCommand, holdsCommand, reconcileCommand, warmupCommand, putOnSaleCommand, restockCommand,
		initCommand, schemaCommand, versionCommand, completionCommand}
}

func commandNamed(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// usage prints 'stockctl COMMAND -h'. A "{window}" in the command's help
// becomes the restock window reconcile uses with o's settings.
func (c command) usage(w io.Writer, fs *flag.FlagSet, o options) {
	text := strings.ReplaceAll(c.help, "{window}", restockWindowText(o))
	fmt.Fprintf(w, "usage: stockctl %s\n\n%s\nflags (-flag or --flag, before or after the arguments; the environment variable in brackets):\n", c.synopsis, text)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, exitText)
}

// parseInterleaved parses fs from args with flags anywhere among the
// positional arguments ("put-on-sale phone 100 --limit 2"); "--" ends the
// flags. It returns the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// setFlags returns the names of the flags given on the command line.
func setFlags(sets ...*flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	for _, fs := range sets {
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	}
	return set
}

// skuArgs checks SKU arguments before anything is connected.
func skuArgs(args []string) error {
	for _, a := range args {
		if err := stock.ValidateID("SKU", a); err != nil {
			return fmt.Errorf("SKU %q: %w", a, err)
		}
	}
	return nil
}

// unitsArg reads a UNITS argument: a whole number of at least min.
func unitsArg(arg string, min int64) (int64, error) {
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n < min || n > stock.MaxUnits {
		return 0, fmt.Errorf("UNITS %q: want a whole number from %d to %d", arg, min, int64(stock.MaxUnits))
	}
	return n, nil
}

// dedupe returns skus without repeats, in their first order.
func dedupe(skus []string) []string {
	seen := make(map[string]bool, len(skus))
	out := skus[:0:0]
	for _, s := range skus {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
