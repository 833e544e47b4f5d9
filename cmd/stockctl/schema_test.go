package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// empty is a database with none of the shop's tables (names no other test
// uses, dropped when the test ends), and the flags that point stockctl at
// it, with a miniredis for a gate.
type empty struct {
	kind, dsn     string
	db            *sqlx.DB
	d             sqlstock.Dialect
	table, ledger string
	conn          []string
}

// forEachDatabase runs fn on an empty database of every kind: SQLite
// always, MariaDB and PostgreSQL when their variables are set.
func forEachDatabase(t *testing.T, fn func(t *testing.T, e *empty)) {
	for _, b := range backends() {
		if b.name != "miniredis+sqlite" && b.name != "redis+mariadb" && b.name != "redis+postgres" {
			continue
		}
		_, name, _ := strings.Cut(b.name, "+")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, env := range b.needs {
				if env != redisEnv && os.Getenv(env) == "" {
					t.Skipf("set %s to run", env)
				}
			}
			e := &empty{table: testdb.Unique("sgctl_stock"), ledger: testdb.Unique("sgctl_ledger")}
			e.kind, e.dsn, e.db, e.d = b.db(t)
			if e.d != sqlstock.SQLite {
				t.Cleanup(func() {
					for _, name := range []string{e.table, e.ledger, e.ledger + "_ops", e.ledger + "_returns"} {
						if _, err := e.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
							t.Errorf("drop %s: %v", name, err)
						}
					}
				})
			}
			e.conn = []string{"--redis", miniredis.RunT(t).Addr(), "--db", e.kind, "--dsn", e.dsn,
				"--table", e.table, "--ledger", e.ledger}
			fn(t, e)
		})
	}
}

// run runs stockctl on e with args after its connection flags.
func (e *empty) run(t *testing.T, args ...string) result {
	return runProgram(t, program{lookupEnv: mapEnv(nil), clock: stock.SystemClock}, append(slices.Clone(e.conn), args...)...)
}

// A first command on a database without the shop's tables says so and
// names 'stockctl init'; init makes them, twice over harmlessly, and the
// command then runs.
func TestInitOnEmptyDatabase(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, e *empty) {
		if e.d == sqlstock.SQLite {
			path := sqlitePath(e.dsn)
			e.run(t, "put-on-sale", "phone", "5").exits(t, exitUsage, "no SQLite database at "+path, "'stockctl init' creates one")
			if _, err := os.Stat(path); err == nil {
				t.Fatal("put-on-sale created the SQLite file")
			}
			if err := e.db.Ping(); err != nil { // an empty file
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"put-on-sale", "phone", "5"}, {"inspect", "phone"}, {"reconcile", "--dry-run"}} {
			r := e.run(t, args...)
			r.exits(t, exitUsage, "table "+e.table+" cannot be read", "the table does not exist: 'stockctl init' creates the shop's tables")
			if r.out != "" {
				t.Errorf("stockctl %v printed to stdout:\n%s", args, r.out)
			}
		}
		want := "the shop's tables are there (" + e.d.String() + "): " +
			strings.Join([]string{e.table, e.ledger, e.ledger + "_ops", e.ledger + "_returns"}, ", ") + "\n"
		e.run(t, "init").is(t, exitOK, want)
		e.run(t, "init").is(t, exitOK, want) // idempotent
		e.run(t, "put-on-sale", "phone", "5").exits(t, exitOK)
		e.run(t, "inspect", "phone").exits(t, exitOK)

		// Init upgrades tables of an earlier version, which lack the
		// ledger's returned column: until then the column is named.
		if _, err := e.db.Exec("ALTER TABLE " + e.ledger + " DROP COLUMN returned"); err != nil {
			t.Fatal(err)
		}
		e.run(t, "inspect", "phone").exits(t, exitUsage, "a column is missing", "'stockctl init' adds")
		e.run(t, "init").is(t, exitOK, want)
		e.run(t, "inspect", "phone").exits(t, exitOK)
	})
}

func TestInitArguments(t *testing.T) {
	s := &shop{t: t}
	dir := t.TempDir()
	s.runRaw("--dsn", filepath.Join(dir, "no", "such", "shop.db"), "init").exits(t, exitUsage, "no directory "+filepath.Join(dir, "no", "such"))
	s.runRaw("--dsn", filepath.Join(dir, "shop.db"), "init", "now").exits(t, exitUsage, `init takes no arguments, not "now"`)
	s.runRaw("init").exits(t, exitUsage, "no database: give --dsn")
	// Init reaches the database alone: no Redis address is needed.
	path := filepath.Join(dir, "shop.db")
	s.runRaw("--dsn", path, "-json", "init").is(t, exitOK, `{
  "dialect": "sqlite",
  "tables": [
    "stock",
    "stockguard_ledger",
    "stockguard_ledger_ops",
    "stockguard_ledger_returns"
  ]
}
`)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("init did not create the SQLite file: %v", err)
	}
}

// The statements schema prints are sqlstock's, run on each database they
// make tables stockctl reads, and run again they change nothing.
func TestSchemaExecutes(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, e *empty) {
		r := e.run(t, "schema", "-dialect", e.d.String())
		r.exits(t, exitOK)
		want, err := sqlstock.Schema(e.d, sqlstock.Config{Table: e.table, Ledger: e.ledger})
		if err != nil {
			t.Fatal(err)
		}
		if r.out != strings.Join(want, ";\n")+";\n" {
			t.Fatalf("schema printed\n%s\nwant sqlstock.Schema's statements:\n%s", r.out, strings.Join(want, ";\n"))
		}
		for range 2 {
			for _, st := range strings.SplitAfter(strings.TrimSuffix(r.out, "\n"), ";\n") {
				if _, err := e.db.Exec(strings.TrimSuffix(st, ";\n")); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
			}
		}
		e.run(t, "inspect", "phone").exits(t, exitUnknownSKU, `"phone"`) // the tables are there, the SKU is not
		e.run(t, "put-on-sale", "phone", "5").exits(t, exitOK)
	})
}

func TestSchemaDialects(t *testing.T) {
	s := &shop{t: t}
	names := sqlstock.Config{Table: "shop_stock", Ledger: "shop_ledger", Columns: sqlstock.Columns{SKU: "id"}}
	flags := []string{"--table", "shop_stock", "--ledger", "shop_ledger", "--columns", "sku=id"}
	for _, c := range []struct {
		args []string
		d    sqlstock.Dialect
	}{
		{[]string{"-dialect", "mysql"}, sqlstock.MySQL},
		{[]string{"--dialect", "MariaDB"}, sqlstock.MariaDB},
		{[]string{"-dialect", "postgresql"}, sqlstock.Postgres},
		{[]string{"-dialect", "sqlite"}, sqlstock.SQLite},
		{[]string{"--db", "postgres"}, sqlstock.Postgres},                                // --db's kind
		{[]string{"--dsn", "shop@tcp(db:3306)/shop"}, sqlstock.MySQL},                    // the DSN's
		{[]string{"--db", "sqlite", "-dialect", "postgres"}, sqlstock.Postgres},          // -dialect wins
		{[]string{"--dsn", "/nowhere/shop.db", "-dialect", "mariadb"}, sqlstock.MariaDB}, // nothing is opened
	} {
		want, err := sqlstock.Schema(c.d, names)
		if err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{"schema"}, c.args...), flags...)
		s.runRaw(args...).is(t, exitOK, strings.Join(want, ";\n")+";\n")

		up, err := sqlstock.Upgrade(c.d, names)
		if err != nil {
			t.Fatal(err)
		}
		s.runRaw(append(args, "--upgrade")...).is(t, exitOK, strings.Join(up, ";\n")+";\n")
	}
	var got struct {
		Dialect    string   `json:"dialect"`
		Statements []string `json:"statements"`
	}
	r := s.runRaw("schema", "-dialect", "postgres", "-json")
	r.exits(t, exitOK)
	r.decode(t, &got)
	if want, _ := sqlstock.Schema(sqlstock.Postgres, sqlstock.Config{}); got.Dialect != "postgres" || !slices.Equal(got.Statements, want) {
		t.Errorf("schema -json: %+v", got)
	}

	s.runRaw("schema").exits(t, exitUsage, "give -dialect mysql, mariadb, postgres or sqlite")
	s.runRaw("schema", "-dialect", "oracle").exits(t, exitUsage, `-dialect "oracle": want mysql`)
	s.runRaw("--db", "oracle", "schema").exits(t, exitUsage, `--db "oracle": want mysql`)
	s.runRaw("schema", "-dialect", "sqlite", "--table", "bad-name").exits(t, exitUsage, "--table, --ledger or --columns")
	s.runRaw("schema", "-dialect", "sqlite", "extra").exits(t, exitUsage, `schema takes no arguments`)
}
