package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

func TestUsageText(t *testing.T) {
	s := &shop{t: t}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"--redis", "x", "-h", "inspect"}} {
		r := s.runRaw(args...)
		r.prints(t, "usage: stockctl [flags] COMMAND [ARGS] [flags]", "reconcile --dry-run|--apply [SKU...]",
			"restock SKU UNITS --op ID", "[STOCKCTL_REDIS]", "[STOCKCTL_DSN]", "STOCKCTL_REDIS_PASSWORD", "PGHOST",
			"exit codes:", "3  an unknown SKU", "4  infrastructure failure", "'stockctl init' creates them")
		for _, c := range commands {
			if !strings.Contains(r.out, c.synopsis) {
				t.Errorf("the usage text does not list %q", c.synopsis)
			}
		}
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
			s.runRaw(args...).prints(t, "usage: stockctl "+c.synopsis+"\n", "exit codes:", "-dsn DSN")
		}
	}
	s.runRaw("holds", "-h").prints(t, "-max N")
	s.runRaw("schema", "-h").prints(t, "-dialect KIND", "-upgrade")
}

func TestUsageErrors(t *testing.T) {
	s := &shop{t: t}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: stockctl"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--bogus", "inspect", "x"}, "flag provided but not defined: -bogus"},
		{[]string{"inspect", "x", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"inspect"}, "name at least one SKU"},
		{[]string{"inspect", "bad sku"}, `SKU "bad sku"`},
		{[]string{"holds", "a", "b"}, "name one SKU"},
		{[]string{"holds", "a", "--max", "-1"}, "--max -1"},
		{[]string{"reconcile", "--dry-run", "--max-fix", "lots"}, "invalid value"},
		{[]string{"--timeout", "soon", "inspect", "x"}, "invalid value"},
		// Connection settings, checked before anything is dialed.
		{[]string{"inspect", "x"}, "no Redis address: give --redis or set STOCKCTL_REDIS"},
		{[]string{"--redis", "127.0.0.1:1", "inspect", "x"}, "no database: give --dsn or set STOCKCTL_DSN"},
		{[]string{"--redis", "localhost", "--dsn", "x.db", "inspect", "x"}, `--redis "localhost": want host:port`},
		{[]string{"--redis", "127.0.0.1:1,nohost", "--dsn", "x.db", "inspect", "x"}, `Cluster node "nohost"`},
		{[]string{"--redis", "redis://:x@[bad", "--dsn", "x.db", "inspect", "x"}, "--redis:"},
		{[]string{"--redis", "127.0.0.1:1", "--dsn", "x.db", "--prefix", "a b", "inspect", "x"}, `--prefix "a b"`},
	} {
		r := s.runRaw(c.args...)
		r.exits(t, exitUsage, c.want)
		if r.out != "" {
			t.Errorf("stockctl %v printed to stdout:\n%s", c.args, r.out)
		}
	}
}

func TestBadDSNs(t *testing.T) {
	s := &shop{t: t}
	dir := t.TempDir()
	for _, c := range []struct {
		db, dsn, want string
	}{
		{"mysql", "root@tcp(127.0.0.1:3306", "--dsn is not a MySQL DSN"},
		{"mariadb", "root@tcp(127.0.0.1:3306)/", "--dsn names no database"},
		{"postgres", "root@tcp(127.0.0.1:3306)/test", "--dsn is not a PostgreSQL DSN"},
		{"postgres", "postgres://u@127.0.0.1:notaport/db", "--dsn is not a PostgreSQL DSN"},
		{"sqlite", filepath.Join(dir, "missing.db"), "no SQLite database at " + filepath.Join(dir, "missing.db")},
		{"sqlite", "file:" + dir + "?_pragma=busy_timeout(1000)", "is a directory"},
		{"sqlite", ":memory:", "in-memory SQLite"},
		{"oracle", "scott/tiger@db", `--db "oracle"`},
		{"", "somewhere", "cannot tell the database from the DSN"},
	} {
		r := s.runRaw("--redis", "127.0.0.1:1", "--db", c.db, "--dsn", c.dsn, "inspect", "x")
		r.exits(t, exitUsage, c.want)
		if strings.Contains(r.err, "tiger") {
			t.Errorf("the error shows the DSN's password:\n%s", r.err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("stockctl created the SQLite file it was pointed at")
	}
}

func TestWrongTablesAndColumns(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 0, 0)
		table := s.conn[slices.Index(s.conn, "--table")+1]
		ledger := s.conn[slices.Index(s.conn, "--ledger")+1]
		s.run("--table", "nosuch_stock", "inspect", "phone").exits(t, exitUsage,
			"table nosuch_stock cannot be read (check --table or --columns")
		s.run("--ledger", "nosuch_ledger", "inspect", "phone").exits(t, exitUsage,
			"table nosuch_ledger cannot be read (check --ledger")
		if s.record.Dialect() != sqlstock.SQLite {
			// SQLite reads a double-quoted name it cannot resolve as a
			// string literal, so a wrong column name is not an error there.
			s.run("--columns", "sku=nosuch", "inspect", "phone").exits(t, exitUsage, "table "+table+" cannot be read")
		}
		s.run("--columns", "colour=red", "inspect", "phone").exits(t, exitUsage, `--columns: "colour=red"`)
		s.run("--table", "bad-name", "inspect", "phone").exits(t, exitUsage, "--table, --ledger or --columns")
		// The default names, given explicitly, read the same tables.
		s.run("--table", table, "--ledger", ledger, "--columns", "sku=sku,hold_ttl=hold_ttl_ms", "inspect", "phone").exits(t, exitOK)
	})
}

func TestUnreachableServers(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		closed := closedAddr(t)
		// Redis: the --redis given last wins.
		s.run("inspect", "phone", "--redis", closed, "--timeout", "10s").exits(t, exitInfra, "redis "+closed+":")
		s.run("--redis", closed+","+closed, "inspect", "phone").exits(t, exitInfra, "redis cluster "+closed)
		// The database: a server that does not answer on its port.
		_, port, _ := net.SplitHostPort(closed)
		s.run("--db", "postgres", "--dsn", "postgres://u@127.0.0.1:"+port+"/db?sslmode=disable", "inspect", "phone").
			exits(t, exitInfra, "PostgreSQL: ")
		s.run("--db", "mysql", "--dsn", "u@tcp("+closed+")/db", "reconcile", "--dry-run").exits(t, exitInfra, "MySQL: ")
	})
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestEnvironment(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		s.putOnSale("phone", 10, 1, 0)
		flags := map[string]string{}
		for i := 0; i < len(s.conn); i += 2 {
			flags[strings.TrimPrefix(s.conn[i], "--")] = s.conn[i+1]
		}
		s.env = map[string]string{}
		for name, env := range envNames {
			if v, ok := flags[name]; ok {
				s.env[env] = v
			}
		}
		want := levelsHeader +
			"phone  gate    10         0     0     0      0          1      15m0s\n" +
			"phone  record  10         0     0     0      0          1      30m0s\n"
		s.runRaw("inspect", "phone").is(t, exitOK, want)

		// A flag wins over its variable.
		s.env["STOCKCTL_PREFIX"] = "elsewhere"
		s.runRaw("inspect", "phone").exits(t, exitUnresolved, `"phone" is on the record only`)
		s.runRaw("inspect", "--prefix", flags["prefix"], "phone").is(t, exitOK, want)
		s.runRaw("--prefix", flags["prefix"], "inspect", "phone").is(t, exitOK, want)

		s.env["STOCKCTL_TIMEOUT"] = "soon"
		s.runRaw("--prefix", flags["prefix"], "inspect", "phone").exits(t, exitUsage, `STOCKCTL_TIMEOUT="soon"`)
	})
}

// TestRunReadsTheProcessEnvironment runs run itself, as main does: the
// connection comes from the STOCKCTL_ variables of the process.
func TestRunReadsTheProcessEnvironment(t *testing.T) {
	b := backends()[0] // miniredis + SQLite
	s := newShop(t, b)
	if err := s.record.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(s.conn); i += 2 {
		t.Setenv(envNames[strings.TrimPrefix(s.conn[i], "--")], s.conn[i+1])
	}
	var out, errs strings.Builder
	code := run(t.Context(), []string{"inspect", "phone"}, &out, &errs)
	want := levelsHeader +
		"phone  gate    -          -     -     -      -          -      -\n" +
		"phone  record  3          0     0     0      0          none   15m0s\n"
	if code != exitUnresolved || out.String() != want {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1 and\n%s", code, out.String(), errs.String(), want)
	}
}

// TestTimeout bounds a command by --timeout: a Redis that accepts the
// connection and never answers is an infrastructure failure, reported in
// time.
func TestTimeout(t *testing.T) {
	s := newShop(t, backends()[0])
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // silent until the test ends
		}
	}()
	defer func() {
		_ = l.Close()
		for c := range accepted {
			_ = c.Close()
		}
	}()
	start := time.Now()
	s.run("--redis", l.Addr().String(), "--timeout", "300ms", "inspect", "phone").
		exits(t, exitInfra, "ran out of time (--timeout 300ms)")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the command took %s with --timeout 300ms", d)
	}
}
