package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard/stock/sqlstock"
)

var initCommand = command{
	name:     "init",
	synopsis: "init",
	summary:  "create the shop's tables on the database (and upgrade an earlier version's)",
	reach:    recordOnly,
	help: `Creates the record's tables (package stock/sqlstock's CreateTables) on the
database --db and --dsn name, with the shop's table and column names: the
stock table, the ledger, its operations table (NAME_ops) and its returns
table (NAME_returns). Tables that are there are left as they are, except
that the columns this version added to tables of an earlier one are added;
running it again, or from several places at once, is harmless. A SQLite
file that is not there is created. It connects to no Redis: the gate is
loaded by 'stockctl put-on-sale' or 'stockctl warmup'.

'stockctl schema' prints the same statements, for a migration tool.
`,
	setup: func(*flag.FlagSet) func([]string) (work, error) {
		return func(args []string) (work, error) {
			if len(args) != 0 {
				return nil, fmt.Errorf("init takes no arguments, not %q", args[0])
			}
			return initTables, nil
		}
	},
}

// initTables creates the record's tables, and says which are there.
func initTables(ctx context.Context, s *session) error {
	if err := s.record.CreateTables(ctx); err != nil {
		return err
	}
	d, tables := s.record.Dialect(), s.record.Tables()
	if s.opts.json {
		return writeJSON(s.out, struct {
			Dialect string   `json:"dialect"`
			Tables  []string `json:"tables"`
		}{d.String(), tables})
	}
	fmt.Fprintf(s.out, "the shop's tables are there (%s): %s\n", d, strings.Join(tables, ", "))
	return nil
}

var schemaCommand = command{
	name:     "schema",
	synopsis: "schema [-dialect KIND] [--upgrade]",
	summary:  "print the statements that create the shop's tables",
	reach:    nothing,
	help: `Prints the statements 'stockctl init' runs (sqlstock.Schema), one per line,
each ending with a semicolon, with the shop's table and column names
(--table, --ledger, --columns), for a migration tool or a DBA. Every
statement is CREATE ... IF NOT EXISTS. --upgrade prints instead the
statements that bring tables of an earlier stockguard to this version
(sqlstock.Upgrade): run them once. Connects to nothing.

-dialect is mysql, mariadb, postgres or sqlite; without it, --db's kind,
or the one the DSN tells.
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		dialect := fs.String("dialect", "", "the database `KIND`: mysql, mariadb, postgres or sqlite (default: --db's)")
		upgrade := fs.Bool("upgrade", false, "print the statements that upgrade tables of an earlier version")
		return func(args []string) (work, error) {
			if len(args) != 0 {
				return nil, fmt.Errorf("schema takes no arguments, not %q", args[0])
			}
			kind, from := *dialect, "-dialect"
			if kind == "" {
				kind, from = fs.Lookup("db").Value.String(), "--db"
			}
			if kind == "" {
				kind, from = guessKind(fs.Lookup("dsn").Value.String()), "--dsn"
			}
			if kind == "" {
				return nil, errors.New("give -dialect mysql, mariadb, postgres or sqlite")
			}
			db, ok := databases[strings.ToLower(strings.TrimSpace(kind))]
			if !ok {
				return nil, fmt.Errorf("%s %q: want mysql, mariadb, postgres or sqlite", from, kind)
			}
			return func(_ context.Context, s *session) error { return printSchema(s, db.dialect, *upgrade) }, nil
		}
	},
}

// printSchema prints the statements of sqlstock.Schema (or Upgrade) in
// dialect d for the shop's names.
func printSchema(s *session, d sqlstock.Dialect, upgrade bool) error {
	cols, err := parseColumns(s.opts.columns)
	if err != nil {
		return usagef("%v", err)
	}
	cfg := sqlstock.Config{Table: s.opts.table, Ledger: s.opts.ledger, Columns: cols}
	of := sqlstock.Schema
	if upgrade {
		of = sqlstock.Upgrade
	}
	stmts, err := of(d, cfg)
	if err != nil {
		return usagef("--table, --ledger or --columns: %v", err)
	}
	if s.opts.json {
		return writeJSON(s.out, struct {
			Dialect    string   `json:"dialect"`
			Statements []string `json:"statements"`
		}{d.String(), stmts})
	}
	for _, st := range stmts {
		fmt.Fprintf(s.out, "%s;\n", st)
	}
	return nil
}
