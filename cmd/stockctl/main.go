// Command stockctl is the operator's tool for a stockguard shop: it reads
// and repairs the stock the shop sells, on the Redis gate (package
// stock/redisstock) and the database record (package stock/sqlstock),
// through the library's public API, as the shop's own nodes do.
//
//	stockctl inspect SKU...                the tiers' levels side by side
//	stockctl holds SKU                     live holds, oldest deadline first
//	stockctl reconcile --dry-run [SKU...]  the drift table; --apply repairs it
//	stockctl warmup [SKU...]               load the gate from the record
//	stockctl put-on-sale SKU UNITS         list a SKU on both tiers
//	stockctl restock SKU UNITS --op ID     add units, once per operation ID
//	stockctl init                          create the shop's tables on the database
//	stockctl schema [-dialect KIND]        print the statements init runs
//	stockctl version                       the version and storage layouts (--version)
//	stockctl completion bash               a bash completion script
//
// It connects to the shop's Redis (--redis; a comma-separated list is a
// Cluster) and database (--db, --dsn) with the shop's key prefix and table
// names (--prefix, --table, --ledger, --columns), record grace
// (--record-grace) and gate Retention (--retention). Every connection flag has
// an environment variable (STOCKCTL_REDIS, STOCKCTL_DSN, ...), and a
// PostgreSQL DSN left empty or partial is completed from libpq's PG*
// variables. Tables and help go to stdout (-json: one JSON object),
// messages to stderr, and the exit code says what happened: 0 done and in
// agreement, 1 drift found or something left unresolved, 2 usage error
// (a missing table among them: 'stockctl init' creates them), 3 unknown
// SKU, 4 infrastructure failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

func main() {
	quietDrivers()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietDrivers stops the Redis client and the MySQL driver from logging
// failed dials and dropped connections on their own: the error that
// matters is returned, and printed once, with what to do about it.
func quietDrivers() {
	redis.SetLogger(nopLogger{})
	_ = mysql.SetLogger(&mysql.NopLogger{})
}

// nopLogger discards go-redis's log lines.
type nopLogger struct{}

func (nopLogger) Printf(context.Context, string, ...any) {}

// run is the whole program; main only supplies its arguments, streams and
// environment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return program{lookupEnv: os.LookupEnv, clock: stock.SystemClock}.run(ctx, args, stdout, stderr)
}

// program is stockctl with what it reads from its surroundings: the
// environment its connection defaults come from, and the clock deadlines
// are computed and shown with (the shop's nodes use the wall clock too).
// Tests give their own.
type program struct {
	lookupEnv func(string) (string, bool)
	clock     stock.Clock
}

// run parses the global flags, the command and its flags, connects, and
// runs the command. Help asked for goes to stdout (exit 0); a usage error
// goes to stderr (exit 2).
func (p program) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := newOptions()
	global := flag.NewFlagSet("stockctl", flag.ContinueOnError)
	quiet(global)
	o.register(global)
	showVersion := global.Bool("version", false, "print stockctl's version and the storage layouts it reads and writes, and exit")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, global)
			return exitOK
		}
		fmt.Fprintf(stderr, "stockctl: %v\nrun 'stockctl -h' for usage\n", err)
		return exitUsage
	}
	name, rest := "version", []string(nil) // --version: the command, whatever follows
	if !*showVersion {
		if global.NArg() == 0 {
			usage(stderr, global)
			return exitUsage
		}
		name, rest = global.Arg(0), global.Args()[1:]
	}
	if name == "help" {
		return p.help(rest, *o, stdout, stderr, global)
	}
	cmd, ok := commandNamed(name)
	if !ok {
		fmt.Fprintf(stderr, "stockctl: unknown command %q (commands: %s)\nrun 'stockctl -h' for usage\n", name, strings.Join(commandNames(), ", "))
		return exitUsage
	}

	fs := flag.NewFlagSet("stockctl "+cmd.name, flag.ContinueOnError)
	quiet(fs)
	o.register(fs) // again, so that connection flags may follow the command
	prepare := cmd.setup(fs)
	pos, err := parseInterleaved(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		_ = o.fromEnv(p.lookupEnv, fs, setFlags(global, fs)) // for the settings the help derives from; a bad one is reported when the command runs
		cmd.usage(stdout, fs, *o)
		return exitOK
	}
	if err == nil {
		err = o.fromEnv(p.lookupEnv, fs, setFlags(global, fs))
		o.graceGiven = setFlags(global, fs)["record-grace"] // fromEnv sets fs's flag from the variable
	}
	if err == nil {
		err = o.check()
	}
	var w work
	if err == nil {
		w, err = prepare(pos)
	}
	if err != nil {
		fmt.Fprintf(stderr, "stockctl %s: %v\nrun 'stockctl %s -h' for usage\n", cmd.name, err, cmd.name)
		return exitUsage
	}

	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	s, err := p.connect(ctx, *o, cmd.reach, stdout, stderr)
	if err != nil {
		return report(stderr, cmd.name, *o, err)
	}
	defer s.close()
	return report(stderr, cmd.name, *o, w(ctx, s))
}

// help answers 'stockctl help [COMMAND]': the usage text on stdout, or an
// unknown command on stderr. o holds the global flags given; the command's
// help derives what it states from them and their environment variables.
func (p program) help(args []string, o options, stdout, stderr io.Writer, global *flag.FlagSet) int {
	if len(args) == 0 {
		usage(stdout, global)
		return exitOK
	}
	cmd, ok := commandNamed(args[0])
	if !ok {
		fmt.Fprintf(stderr, "stockctl: unknown command %q (commands: %s)\n", args[0], strings.Join(commandNames(), ", "))
		return exitUsage
	}
	fs := flag.NewFlagSet("stockctl "+cmd.name, flag.ContinueOnError)
	quiet(fs)
	o.register(fs)
	cmd.setup(fs)
	_ = o.fromEnv(p.lookupEnv, fs, setFlags(global))
	cmd.usage(stdout, fs, o)
	return exitOK
}

// quiet makes fs report its errors to run instead of printing them with
// the whole usage text.
func quiet(fs *flag.FlagSet) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
}

// usage prints the program's usage text.
func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprint(w, `usage: stockctl [flags] COMMAND [ARGS] [flags]

Reads and repairs the stock a stockguard shop sells: the Redis gate
(redisstock) beside the database record (sqlstock), through the calls the
shop's own nodes make.

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n    \t%s\n", c.synopsis, c.summary)
	}
	fmt.Fprint(w, `
'stockctl COMMAND -h' describes one command and its flags.

flags (-flag or --flag, before or after the command; the environment variable in brackets):
`)
	global.SetOutput(w)
	global.PrintDefaults()
	global.SetOutput(io.Discard)
	fmt.Fprint(w, exitText+`
example:
  export STOCKCTL_REDIS=127.0.0.1:6379 STOCKCTL_DSN='shop@tcp(db:3306)/shop'
  stockctl init        # once, on a new database
  stockctl inspect phone
  stockctl reconcile --dry-run || stockctl reconcile --apply
`)
}

// exitText documents the exit codes, in the usage text of the program and
// of every command.
const exitText = `
environment, besides the flags':
  STOCKCTL_REDIS_PASSWORD  Redis password (or give a redis:// URL)
  PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, PGSSLMODE, ...
                           what a PostgreSQL DSN leaves out, as psql reads them
                           (--db postgres with no DSN: all of it)

exit codes:
  0  done; the tiers are in agreement
  1  drift found (reconcile --dry-run), or something left unresolved
     (a correction above --max-fix, a SKU on one tier only, live holds
     that warmup refused)
  2  usage error: bad flags or arguments, a bad DSN, prefix or table
     name, a table that is missing ('stockctl init' creates them), an
     unknown command, input the stores refuse
  3  an unknown SKU: on sale on neither tier (warmup: not in the record)
  4  infrastructure failure: Redis or the database unreachable, failing
     or too slow (--timeout); an outcome that is unknown (run the same
     command again: every command is idempotent)
`
