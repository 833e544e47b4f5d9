package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The variables that point the tests at real servers (CI sets them all).
const (
	redisEnv    = "STOCKGUARD_REDIS_ADDR"
	clusterEnv  = "STOCKGUARD_REDIS_CLUSTER"
	mysqlEnv    = "STOCKGUARD_MYSQL_DSN"
	postgresEnv = "STOCKGUARD_POSTGRES_DSN"
)

func TestMain(m *testing.M) {
	quietDrivers() // as main does
	testdb.Main(m)
}

// backend is one gate + record pair stockctl runs on in the tests.
type backend struct {
	name  string
	needs []string // the variables it needs: skipped, naming them, without
	redis func(t *testing.T) (addr string, c redis.UniversalClient, mini *miniredis.Miniredis)
	db    func(t *testing.T) (kind, dsn string, db *sqlx.DB, d sqlstock.Dialect)
}

// backends are miniredis + SQLite, always, and the real servers: Redis
// with MariaDB and with PostgreSQL, and a Redis Cluster with SQLite.
func backends() []backend {
	mini := func(t *testing.T) (string, redis.UniversalClient, *miniredis.Miniredis) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return m.Addr(), c, m
	}
	real := func(t *testing.T) (string, redis.UniversalClient, *miniredis.Miniredis) {
		addr := os.Getenv(redisEnv)
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		return addr, c, nil
	}
	cluster := func(t *testing.T) (string, redis.UniversalClient, *miniredis.Miniredis) {
		addrs := os.Getenv(clusterEnv)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
		t.Cleanup(func() { _ = c.Close() })
		return addrs, c, nil
	}
	sqlite := func(t *testing.T) (string, string, *sqlx.DB, sqlstock.Dialect) {
		dsn := "file:" + filepath.Join(t.TempDir(), "shop.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
		return "sqlite", dsn, testdb.Open(t, "sqlite", dsn, 4), sqlstock.SQLite
	}
	mariadb := func(t *testing.T) (string, string, *sqlx.DB, sqlstock.Dialect) {
		dsn := os.Getenv(mysqlEnv) // stockctl adds interpolateParams itself, and tells MariaDB from MySQL
		return "mysql", dsn, testdb.Open(t, "mysql", testdb.WithParam(dsn, "interpolateParams=true"), 4), sqlstock.MariaDB
	}
	postgres := func(t *testing.T) (string, string, *sqlx.DB, sqlstock.Dialect) {
		dsn := os.Getenv(postgresEnv)
		return "postgres", dsn, testdb.Open(t, "pgx", dsn, 4), sqlstock.Postgres
	}
	return []backend{
		{name: "miniredis+sqlite", redis: mini, db: sqlite},
		{name: "redis+mariadb", needs: []string{redisEnv, mysqlEnv}, redis: real, db: mariadb},
		{name: "redis+postgres", needs: []string{redisEnv, postgresEnv}, redis: real, db: postgres},
		{name: "cluster+sqlite", needs: []string{clusterEnv}, redis: cluster, db: sqlite},
	}
}

// shop is one test's gate and record (a key prefix and tables no other
// test uses, removed when it ends), the library's tiers over them for
// setting up and checking, and the flags that point stockctl at them.
type shop struct {
	t      *testing.T
	ctx    context.Context
	clock  *stocktest.Clock
	conn   []string // --redis ... --ledger: where the shop is
	env    map[string]string
	mini   *miniredis.Miniredis
	rc     redis.UniversalClient // the gate's Redis
	prefix string                // the gate's key prefix
	gate   *redisstock.Store
	record *sqlstock.Store
	flow   *tiered.Manager
}

// forEach runs fn on a fresh shop on every backend, in parallel.
func forEach(t *testing.T, fn func(t *testing.T, s *shop)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newShop(t, b))
		})
	}
}

func newShop(t *testing.T, b backend) *shop {
	t.Helper()
	var missing []string
	for _, env := range b.needs {
		if os.Getenv(env) == "" {
			missing = append(missing, env)
		}
	}
	if len(missing) > 0 {
		testdb.CountSkip(missing...)
		t.Skipf("%s: set %s to run", b.name, strings.Join(missing, " and "))
	}
	s := &shop{t: t, ctx: context.Background(), clock: stocktest.NewClock(stocktest.Epoch)}
	addr, rc, mini := b.redis(t)
	s.mini, s.rc = mini, rc
	prefix := testdb.Unique("sgctl")
	s.prefix = prefix
	var err error
	if s.gate, err = redisstock.New(rc, redisstock.Config{Prefix: prefix, Clock: s.clock}); err != nil {
		t.Fatal(err)
	}
	if mini == nil {
		t.Cleanup(func() { deleteKeys(t, rc, prefix) })
	}
	kind, dsn, db, d := b.db(t)
	table, ledger := testdb.Unique("sgctl_stock"), testdb.Unique("sgctl_ledger")
	if s.record, err = sqlstock.New(db.DB, sqlstock.Config{Dialect: d, Table: table, Ledger: ledger, Clock: s.clock}); err != nil {
		t.Fatal(err)
	}
	if err := s.record.CreateTables(s.ctx); err != nil {
		t.Fatal(err)
	}
	if d != sqlstock.SQLite { // SQLite's file goes with t.TempDir
		t.Cleanup(func() {
			for _, name := range slices.Backward(s.record.Tables()) {
				if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
					t.Errorf("drop %s: %v", name, err)
				}
			}
		})
	}
	s.flow = tiered.New(s.gate, s.record, tiered.Config{Clock: s.clock})
	s.conn = []string{"--redis", addr, "--prefix", prefix, "--db", kind, "--dsn", dsn, "--table", table, "--ledger", ledger}
	return s
}

// deleteKeys removes the test's keys from a shared Redis (never FLUSHALL),
// on every master of a Cluster.
func deleteKeys(t *testing.T, rc redis.UniversalClient, prefix string) {
	ctx := context.Background()
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	switch c := rc.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, c)
	}
	if err != nil {
		t.Errorf("delete keys %s:*: %v", prefix, err)
	}
}

// result is one run of stockctl.
type result struct {
	args     []string
	code     int
	out, err string
}

// run runs stockctl with the shop's connection flags before args, its
// clock, and s.env as the whole environment.
func (s *shop) run(args ...string) result {
	return s.runRaw(append(slices.Clone(s.conn), args...)...)
}

// runRaw runs stockctl with args alone (no connection flags).
func (s *shop) runRaw(args ...string) result {
	return runProgram(s.t, program{lookupEnv: mapEnv(s.env), clock: s.clock}, args...)
}

func runProgram(t *testing.T, p program, args ...string) result {
	t.Helper()
	var out, errs bytes.Buffer
	code := p.run(context.Background(), args, &out, &errs)
	return result{args: args, code: code, out: out.String(), err: errs.String()}
}

// mapEnv is an environment holding only env.
func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// is checks the exit code and the whole of stdout.
func (r result) is(t *testing.T, code int, stdout string) {
	t.Helper()
	if r.code != code || r.out != stdout {
		t.Fatalf("stockctl %s\nexit %d, want %d\nstdout:\n%s\nwant stdout:\n%s\nstderr:\n%s",
			strings.Join(r.args, " "), r.code, code, r.out, stdout, r.err)
	}
}

// exits checks the exit code and that stderr has every one of parts.
func (r result) exits(t *testing.T, code int, parts ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("stockctl %s\nexit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, code, r.out, r.err)
	}
	for _, p := range parts {
		if !strings.Contains(r.err, p) {
			t.Errorf("stockctl %s: stderr has no %q:\n%s", strings.Join(r.args, " "), p, r.err)
		}
	}
	if strings.Contains(r.err, "goroutine ") || strings.Contains(r.err, "panic") {
		t.Errorf("stockctl %s: stderr has a stack trace:\n%s", strings.Join(r.args, " "), r.err)
	}
}

// prints checks that help was asked for and given: exit 0, stdout with
// every one of parts, nothing on stderr.
func (r result) prints(t *testing.T, parts ...string) {
	t.Helper()
	if r.code != exitOK || r.err != "" {
		t.Fatalf("stockctl %s\nexit %d, want 0\nstdout:\n%s\nstderr (want none):\n%s", strings.Join(r.args, " "), r.code, r.out, r.err)
	}
	for _, p := range parts {
		if !strings.Contains(r.out, p) {
			t.Errorf("stockctl %s: stdout has no %q:\n%s", strings.Join(r.args, " "), p, r.out)
		}
	}
}

// decode reads stdout as one JSON object into v.
func (r result) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stockctl %s: stdout is not the JSON expected: %v\n%s", strings.Join(r.args, " "), err, r.out)
	}
	if dec.More() {
		t.Fatalf("stockctl %s: stdout has more than one JSON value:\n%s", strings.Join(r.args, " "), r.out)
	}
}

// putOnSale lists a SKU through the tiered flow, as a shop does.
func (s *shop) putOnSale(sku string, units, limit int64, hold time.Duration) {
	s.t.Helper()
	if err := s.flow.PutOnSale(s.ctx, stock.Listing{SKU: sku, Units: units, PerUserLimit: limit, HoldTTL: hold}); err != nil {
		s.t.Fatalf("put %s on sale: %v", sku, err)
	}
}

// deduct places a one-line order through m: the flow (both tiers), the
// gate alone or the record alone.
func (s *shop) deduct(m stock.Manager, id, user, sku string, qty int64) {
	s.t.Helper()
	if err := m.Deduct(s.ctx, stock.Order{ID: id, UserID: user, Items: []stock.Item{{SKU: sku, Qty: qty}}}); err != nil {
		s.t.Fatalf("deduct %s: %v", id, err)
	}
}

// levels reads a SKU from both tiers through the library.
func (s *shop) levels(sku string) (gate, record stock.Levels) {
	s.t.Helper()
	g, err := s.gate.Levels(s.ctx, sku)
	if err != nil {
		s.t.Fatalf("gate levels of %s: %v", sku, err)
	}
	r, err := s.record.Levels(s.ctx, sku)
	if err != nil {
		s.t.Fatalf("record levels of %s: %v", sku, err)
	}
	return g, r
}

// wantAvailable checks both tiers' available units of a SKU.
func (s *shop) wantAvailable(sku string, gate, record int64) {
	s.t.Helper()
	g, r := s.levels(sku)
	if g.Available != gate || r.Available != record {
		s.t.Fatalf("%s available: gate %d, record %d; want %d, %d", sku, g.Available, r.Available, gate, record)
	}
}

// adjust moves the gate's available units of a SKU by delta, fenced: a
// drift made on purpose.
func (s *shop) adjust(sku string, delta int64) {
	s.t.Helper()
	st, err := s.gate.Inspect(s.ctx, []string{sku})
	if err != nil {
		s.t.Fatal(err)
	}
	if ok, err := s.gate.Adjust(s.ctx, sku, st[0].Fence, delta); err != nil || !ok {
		s.t.Fatalf("adjust %s by %d: applied %v, %v", sku, delta, ok, err)
	}
}
