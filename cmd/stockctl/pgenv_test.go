package main

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"

	"github.com/stockguard/stockguard/internal/testdb"
)

// withoutPG clears libpq's variables for the test (restored when it ends).
func withoutPG(t *testing.T) {
	for _, v := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSSLMODE",
		"PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGAPPNAME", "PGCONNECT_TIMEOUT", "PGOPTIONS", "PGTARGETSESSIONATTRS",
		"PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGSSLPASSWORD", "PGSSLSNI", "PGSSLNEGOTIATION", "PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION"} {
		t.Setenv(v, "")
		_ = os.Unsetenv(v)
	}
}

// A PostgreSQL DSN that is empty or partial is completed from the PG*
// variables, as psql completes it; what the DSN names wins.
func TestPostgresVariables(t *testing.T) {
	withoutPG(t)
	for k, v := range map[string]string{"PGHOST": "127.0.0.9", "PGPORT": "5499", "PGUSER": "shopuser",
		"PGPASSWORD": "s3cret", "PGDATABASE": "shop", "PGSSLMODE": "disable"} {
		t.Setenv(k, v)
	}
	for _, c := range []struct {
		kind, dsn                string
		host                     string
		port                     uint16
		user, password, database string
	}{
		{"postgres", "", "127.0.0.9", 5499, "shopuser", "s3cret", "shop"},
		{"pgx", "   ", "127.0.0.9", 5499, "shopuser", "s3cret", "shop"},
		{"postgres", "dbname=other", "127.0.0.9", 5499, "shopuser", "s3cret", "other"},
		{"", "dbname=other user=clerk", "127.0.0.9", 5499, "clerk", "s3cret", "other"},
		{"", "postgres:///other", "127.0.0.9", 5499, "shopuser", "s3cret", "other"},
		{"", "postgres://clerk:pw@127.0.0.1:5434/d2?sslmode=disable", "127.0.0.1", 5434, "clerk", "pw", "d2"},
	} {
		tg, err := databaseOf(c.kind, c.dsn, false)
		if err != nil {
			t.Fatalf("--db %q --dsn %q: %v", c.kind, c.dsn, err)
		}
		if tg.pg == nil {
			t.Fatalf("--db %q --dsn %q: not opened as PostgreSQL", c.kind, c.dsn)
		}
		p := tg.pg
		if p.Host != c.host || p.Port != c.port || p.User != c.user || p.Password != c.password || p.Database != c.database || p.TLSConfig != nil {
			t.Errorf("--db %q --dsn %q: host %s port %d user %s password %q database %s TLS %v; want %s %d %s %q %s and no TLS (PGSSLMODE=disable)",
				c.kind, c.dsn, p.Host, p.Port, p.User, p.Password, p.Database, p.TLSConfig != nil, c.host, c.port, c.user, c.password, c.database)
		}
	}

	s := &shop{t: t}
	// The connection goes where the variables say.
	closed := closedAddr(t)
	_, port, _ := net.SplitHostPort(closed)
	t.Setenv("PGHOST", "127.0.0.1")
	t.Setenv("PGPORT", port)
	r := s.runRaw("--db", "postgres", "init")
	r.exits(t, exitInfra, "PostgreSQL: ", "127.0.0.1:"+port, "shopuser", "shop")
	if strings.Contains(r.err, "s3cret") {
		t.Errorf("the error shows the password:\n%s", r.err)
	}
	s.runRaw("--redis", closed, "--db", "postgres", "inspect", "x").exits(t, exitInfra)

	t.Setenv("PGSSLMODE", "sometimes")
	s.runRaw("--db", "postgres", "init").exits(t, exitUsage, "or a PG* variable is wrong")
	s.runRaw("init").exits(t, exitUsage, "no database: give --dsn or set STOCKCTL_DSN (--db postgres alone takes libpq's PG* variables)")
	s.runRaw("--db", "mysql", "init").exits(t, exitUsage, "no MySQL database: give --dsn")
}

// On a real server: init and put-on-sale with no DSN at all, the server,
// user and database coming from the PG* variables.
func TestPostgresFromVariables(t *testing.T) {
	dsn := testdb.Need(t, testdb.Server{Env: postgresEnv, What: "PostgreSQL", Form: "a postgres:// URL"})
	withoutPG(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGHOST", cfg.Host)
	t.Setenv("PGPORT", strconv.Itoa(int(cfg.Port)))
	t.Setenv("PGUSER", cfg.User)
	t.Setenv("PGPASSWORD", cfg.Password)
	t.Setenv("PGDATABASE", cfg.Database)
	t.Setenv("PGSSLMODE", "disable")

	db := testdb.Open(t, "pgx", dsn, 2)
	table, ledger := testdb.Unique("sgctl_stock"), testdb.Unique("sgctl_ledger")
	t.Cleanup(func() {
		for _, name := range []string{table, ledger, ledger + "_ops", ledger + "_returns"} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
	})
	s := &shop{t: t}
	names := []string{"--table", table, "--ledger", ledger}
	s.runRaw(append([]string{"--db", "postgres", "init"}, names...)...).exits(t, exitOK)
	// A partial DSN: the database named, the rest from the variables.
	s.runRaw(append([]string{"--dsn", "dbname=" + cfg.Database, "--redis", miniredis.RunT(t).Addr(),
		"put-on-sale", "phone", "7"}, names...)...).exits(t, exitOK)
	var avail int64
	if err := db.QueryRow("SELECT available FROM " + table + " WHERE sku = 'phone'").Scan(&avail); err != nil || avail != 7 {
		t.Fatalf("the record has %d of phone (%v), want 7", avail, err)
	}
}
