package reconcile_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// pair is one gate + record combination the tests run on.
type pair struct {
	name string
	// needs are the real servers the pair runs on (it skips without them).
	needs  []testdb.Server
	redis  func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis)
	record func(t testing.TB) (*sqlx.DB, sqlstock.Dialect)
}

// pairs returns miniredis + SQLite, and real Redis with MariaDB and
// PostgreSQL and the Cluster with PostgreSQL: those skip, naming the
// variables they need, when the servers are not given.
func pairs() []pair {
	mini := func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		return c, m
	}
	real := func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
		c := redis.NewClient(&redis.Options{Addr: testdb.Need(t, testdb.Redis)})
		t.Cleanup(func() { c.Close() })
		return c, nil
	}
	clu := func(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
		t.Cleanup(func() { c.Close() })
		return c, nil
	}
	sqlite := func(t testing.TB) (*sqlx.DB, sqlstock.Dialect) { return testdb.SQLite(t, 16), sqlstock.SQLite }
	mariadb := func(t testing.TB) (*sqlx.DB, sqlstock.Dialect) { return testdb.MariaDB(t, 16), sqlstock.MariaDB }
	postgres := func(t testing.TB) (*sqlx.DB, sqlstock.Dialect) { return testdb.PostgreSQL(t, 16), sqlstock.Postgres }
	return []pair{
		{name: "miniredis+sqlite", redis: mini, record: sqlite},
		{name: "redis+mariadb", needs: []testdb.Server{testdb.Redis, testdb.MySQL}, redis: real, record: mariadb},
		{name: "redis+postgres", needs: []testdb.Server{testdb.Redis, testdb.Postgres}, redis: real, record: postgres},
		{name: "cluster+postgres", needs: []testdb.Server{testdb.Cluster, testdb.Postgres}, redis: clu, record: postgres},
	}
}

// world is one test's gate, record, tiered flow and reconciler.
type world struct {
	t      testing.TB
	ctx    context.Context
	clock  *stocktest.Clock
	mini   *miniredis.Miniredis
	rc     redis.UniversalClient
	prefix string
	gate   *redisstock.Store
	record *sqlstock.Store
	flow   *tiered.Manager
	// recordDB and table are the database and stock table behind record.
	recordDB *sqlx.DB
	table    string
	rec      *reconcile.Reconciler
	mu       sync.Mutex
	seen     []reconcile.Correction
}

func newWorld(t testing.TB, p pair, cfg reconcile.Config) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), clock: stocktest.NewClock(stocktest.Epoch)}
	w.rc, w.mini = p.redis(t)
	w.prefix = testdb.Unique("sgrec")
	var err error
	w.gate, err = redisstock.New(w.rc, redisstock.Config{Prefix: w.prefix, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	db, d := p.record(t)
	table, ledger := testdb.Unique("sgrs"), testdb.Unique("sgrl")
	w.recordDB, w.table = db, table
	w.record, err = sqlstock.New(db.DB, sqlstock.Config{Dialect: d, Table: table, Ledger: ledger, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.record.CreateTables(w.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{ledger, table} {
			q := `"` + name + `"`
			if d == sqlstock.MariaDB {
				q = "`" + name + "`"
			}
			if _, err := db.ExecContext(context.Background(), "DROP TABLE "+q); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		}
		if w.mini == nil {
			w.deleteKeys()
		}
	})
	w.flow = tiered.New(w.gate, w.record, tiered.Config{Clock: w.clock})
	hook := cfg.OnCorrection
	cfg.OnCorrection = func(c reconcile.Correction) {
		w.mu.Lock()
		w.seen = append(w.seen, c)
		w.mu.Unlock()
		if hook != nil {
			hook(c)
		}
	}
	w.rec, err = reconcile.New(w.gate, w.record, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// deleteKeys removes the test's keys from a shared real Redis (never
// FLUSHALL): the "flush" of a real server, and the cleanup.
func (w *world) deleteKeys() {
	del := func(ctx context.Context, c *redis.Client) error {
		var keys []string
		iter := c.Scan(ctx, 0, w.prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil || len(keys) == 0 {
			return err
		}
		if _, cluster := w.rc.(*redis.ClusterClient); !cluster {
			return c.Del(ctx, keys...).Err() // one command: as atomic as FLUSHALL
		}
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Del(ctx, k)
			}
			return nil
		})
		return err
	}
	var err error
	switch c := w.rc.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(w.ctx, del)
	case *redis.Client:
		err = del(w.ctx, c)
	}
	if err != nil {
		w.t.Errorf("delete keys: %v", err)
	}
}

// flush loses Redis's data: FLUSHALL on miniredis, the test's keys on a
// real server.
func (w *world) flush() {
	if w.mini != nil {
		w.mini.FlushAll()
		return
	}
	w.deleteKeys()
}

func (w *world) sale(sku string, units int64) {
	w.t.Helper()
	if err := w.flow.PutOnSale(w.ctx, stock.Listing{SKU: sku, Units: units}); err != nil {
		w.t.Fatalf("PutOnSale %s: %v", sku, err)
	}
}

func order(id string, sku string, qty int64) stock.Order {
	return stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: qty}}}
}

func (w *world) must(err error, what string) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

// levels returns Redis's and the database's levels of sku.
func (w *world) levels(sku string) (gate, rec stock.Levels) {
	w.t.Helper()
	g, err := w.gate.Levels(w.ctx, sku)
	w.must(err, "gate Levels")
	r, err := w.record.Levels(w.ctx, sku)
	w.must(err, "record Levels")
	return g, r
}

// forEach runs f on every pair.
func forEach(t *testing.T, f func(t *testing.T, p pair)) {
	for _, p := range pairs() {
		t.Run(p.name, func(t *testing.T) { testdb.Need(t, p.needs...); f(t, p) })
	}
}

// corrections returns what the hook has seen so far.
func (w *world) corrections() []reconcile.Correction {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]reconcile.Correction(nil), w.seen...)
}

func (w *world) ctxCancel() (context.Context, context.CancelFunc) { return context.WithCancel(w.ctx) }

// marked reports whether the reconciler's marker is set.
func (w *world) marked() bool {
	s, err := w.gate.Servers(w.ctx)
	return err == nil && s.Marked
}
