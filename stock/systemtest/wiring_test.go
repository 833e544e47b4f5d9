package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/systemtest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// backend is one gate + record pairing the checker runs on.
type backend struct {
	name string
	// needs are the real servers the pairing runs on, and commands the
	// programs it starts: none for miniredis + SQLite.
	needs    []testdb.Server
	commands []string
	// redis returns the client of the flow (with systemtest.RedisHook
	// installed), a flush, if the test owns the server a restart, and the
	// miniredis servers whose key lifetimes the shop's clock moves.
	redis  func(t testing.TB, prefix string) (rc redis.UniversalClient, flush, restart func(context.Context) error, minis []*miniredis.Miniredis)
	record func(t testing.TB) (*sqlx.DB, sqlstock.Dialect)
	seeds  int
	// buckets, when above 1, splits every SKU into that many buckets
	// (stock.Listing.Buckets; a Cluster client only).
	buckets int
}

// backends returns miniredis + SQLite, and the pairings on the real
// servers the STOCKGUARD_* variables name, which skip (need) when a
// variable is not set.
func backends() []backend {
	return []backend{
		{name: "miniredis+sqlite", redis: miniRedis, record: sqlite, seeds: 12},
		{name: "redis+mariadb", needs: []testdb.Server{testdb.Redis, testdb.MySQL}, redis: sharedRedis, record: mariadb, seeds: 4},
		{name: "own-redis+postgres", needs: []testdb.Server{testdb.Postgres}, commands: []string{"redis-server"}, redis: ownRedis, record: postgres, seeds: 4},
		{name: "cluster+postgres", needs: []testdb.Server{testdb.Cluster, testdb.Postgres}, redis: clusterRedis, record: postgres, seeds: 4},
		{name: "miniredis-cluster+sqlite/buckets", redis: miniCluster, record: sqlite, seeds: 8, buckets: 3},
		{name: "miniredis-ring+sqlite", redis: miniRing, record: sqlite, seeds: 4},
		{name: "cluster+postgres/buckets", needs: []testdb.Server{testdb.Cluster, testdb.Postgres}, redis: clusterRedis, record: postgres, seeds: 4, buckets: 3},
	}
}

// need skips t when b's servers are not given or its programs are not on
// the PATH: call it in b's subtest before the cases under it, so that it
// skips once.
func (b backend) need(t testing.TB) {
	t.Helper()
	testdb.Need(t, b.needs...)
	for _, c := range b.commands {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s: %s is not on the PATH", b.name, c)
		}
	}
}

func sqlite(t testing.TB) (*sqlx.DB, sqlstock.Dialect) { return testdb.SQLite(t, 16), sqlstock.SQLite }

func mariadb(t testing.TB) (*sqlx.DB, sqlstock.Dialect) {
	return testdb.MariaDB(t, 16), sqlstock.MariaDB
}

func postgres(t testing.TB) (*sqlx.DB, sqlstock.Dialect) {
	return testdb.PostgreSQL(t, 16), sqlstock.Postgres
}

func miniRedis(t testing.TB, _ string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	c.AddHook(systemtest.RedisHook{})
	t.Cleanup(func() { c.Close() })
	flush := func(context.Context) error { m.FlushAll(); return nil }
	restart := func(context.Context) error {
		m.Close()
		m.FlushAll()
		return m.Restart()
	}
	return c, flush, restart, []*miniredis.Miniredis{m}
}

// miniCluster is a miniredis behind a ClusterClient: one node owning
// every slot, so the Store takes its Cluster paths (slot groups, buckets).
func miniCluster(t testing.TB, _ string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	m := miniredis.RunT(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}})
	c.AddHook(systemtest.RedisHook{})
	t.Cleanup(func() { c.Close() })
	flush := func(context.Context) error { m.FlushAll(); return nil }
	return c, flush, nil, []*miniredis.Miniredis{m}
}

// miniRing is a Ring of two miniredis servers: keys are spread by their
// hash tag with the Ring's own hash, so the Store takes the paths of a
// client whose keys live on several servers (slot groups, directory
// shards) without a Cluster's slots.
func miniRing(t testing.TB, _ string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	a, b := miniredis.RunT(t), miniredis.RunT(t)
	c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	c.AddHook(systemtest.RedisHook{})
	t.Cleanup(func() { c.Close() })
	flush := func(context.Context) error { a.FlushAll(); b.FlushAll(); return nil }
	return c, flush, nil, []*miniredis.Miniredis{a, b}
}

// sharedRedis is the server STOCKGUARD_REDIS_ADDR names, which other
// tests use too: a flush deletes the flow's keys only, and it is never
// restarted.
func sharedRedis(t testing.TB, prefix string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	c := redis.NewClient(&redis.Options{Addr: testdb.Need(t, testdb.Redis)})
	c.AddHook(systemtest.RedisHook{})
	t.Cleanup(func() { _ = deleteKeys(context.Background(), c, prefix); c.Close() })
	return c, func(ctx context.Context) error { return deleteKeys(ctx, c, prefix) }, nil, nil
}

// clusterRedis is the Cluster STOCKGUARD_REDIS_CLUSTER names: a flush
// deletes the flow's keys on every master.
func clusterRedis(t testing.TB, prefix string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
	c.AddHook(systemtest.RedisHook{})
	flush := func(ctx context.Context) error {
		return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return deleteKeys(ctx, m, prefix) })
	}
	t.Cleanup(func() { _ = flush(context.Background()); c.Close() })
	return c, flush, nil, nil
}

// deleteKeys deletes the flow's keys from one server in one command.
func deleteKeys(ctx context.Context, c *redis.Client, prefix string) error {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	// One DEL per slot: a single server takes them all, a Cluster master
	// only keys of one slot per command.
	bySlot := map[string][]string{}
	for _, k := range keys {
		tag := k
		if i := strings.IndexByte(k, '{'); i >= 0 {
			if j := strings.IndexByte(k[i:], '}'); j > 0 {
				tag = k[i : i+j]
			}
		}
		bySlot[tag] = append(bySlot[tag], k)
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, ks := range bySlot {
			for _, k := range ks {
				p.Del(ctx, k)
			}
		}
		return nil
	})
	return err
}

// ownRedis starts a redis-server of the test's own on a free port, so that
// it can be flushed and restarted without touching anyone else's server.
func ownRedis(t testing.TB, _ string) (redis.UniversalClient, func(context.Context) error, func(context.Context) error, []*miniredis.Miniredis) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	var cmd *exec.Cmd
	start := func() error {
		cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			return err
		}
		probe := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		defer probe.Close()
		for range 200 {
			if probe.Ping(context.Background()).Err() == nil {
				return nil
			}
			time.Sleep(10 * time.Millisecond)
		}
		return errors.New("redis-server did not come up")
	}
	stop := func() {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	if err := start(); err != nil {
		t.Skipf("own redis-server: %v", err)
	}
	t.Cleanup(stop)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	c.AddHook(systemtest.RedisHook{})
	t.Cleanup(func() { c.Close() })
	flush := func(ctx context.Context) error { return c.FlushAll(ctx).Err() }
	restart := func(context.Context) error { stop(); return start() }
	return c, flush, restart, nil
}

// clock is the shop's clock; on miniredis it is the server's clock too
// (TIME, by which the gate ends an ended order's records Retention
// later) and moves the server's key lifetimes with it.
type clock struct {
	*stocktest.Clock
	minis []*miniredis.Miniredis
}

func newClock(minis []*miniredis.Miniredis) clock {
	c := clock{Clock: stocktest.NewClock(stocktest.Epoch), minis: minis}
	for _, m := range minis {
		m.SetTime(c.Now())
	}
	return c
}

func (c clock) Advance(d time.Duration) {
	c.Clock.Advance(d)
	for _, m := range c.minis {
		m.FastForward(d)
		m.SetTime(c.Now())
	}
}

// retention is the gate's Retention: longer than any run's clock, so that
// every retry the checker makes is one the gate still recognises.
const retention = 3 * time.Hour

// wire builds the checker's Config on b: each node is a stockguard.Shop
// of its own over the shared servers (the shop a user wires), and another
// Shop reads the tiers for the checks and runs the reconcile passes.
func wire(t testing.TB, b backend, seed uint64) systemtest.Config {
	return wireGrace(t, b, seed, 0)
}

// loadScripts loads the gate's scripts on every server of c before the
// flow runs, so that the Redis calls a step's fault counts are the Store's
// own from the first step on: a server that lacks a script answers
// NOSCRIPT, and the Store sends the call again (as EVAL, or once it has
// loaded the script), which would move the calls a sweep reaches. A
// server the test restarts loses them; the Store loads them again.
func loadScripts(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	load := func(ctx context.Context, s redis.Scripter) error {
		for _, name := range lua.Names() {
			if !strings.HasPrefix(name, "stock_") {
				continue
			}
			if err := redis.NewScript(lua.Script(name)).Load(ctx, s).Err(); err != nil {
				return fmt.Errorf("loading %s: %w", name, err)
			}
		}
		return nil
	}
	var err error
	if ring, ok := c.(*redis.Ring); ok {
		err = ring.ForEachShard(t.Context(), func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	} else {
		err = load(t.Context(), c) // a ClusterClient's SCRIPT LOAD reaches every master
	}
	if err != nil {
		t.Fatal(err)
	}
}

// never is a breaker's ReadyToTrip that never opens it.
func never(gobreaker.Counts) bool { return false }

// wireGrace is wire with tiered.Config.RecordGrace grace.
func wireGrace(t testing.TB, b backend, seed uint64, grace time.Duration) systemtest.Config {
	prefix := testdb.Unique("sgsys")
	rc, flush, restart, minis := b.redis(t, prefix)
	loadScripts(t, rc)
	db, d := b.record(t)
	table, ledger := testdb.Unique("sgss"), testdb.Unique("sgsl")
	clk := newClock(minis)
	shop := func(wrap systemtest.Wrap) *stockguard.Shop {
		s, err := stockguard.New(rc, db.DB, stockguard.Config{
			Gate:   redisstock.Config{Prefix: prefix, Retention: retention, MaxBatch: 1},
			Record: sqlstock.Config{Table: table, Ledger: ledger},
			Flow:   tiered.Config{RecheckAfter: time.Millisecond, RecordGrace: grace},
			// The breakers never open: the gate bound the checker holds the
			// shop to assumes every node sends its orders to the gate (the
			// breaker's outage is the degrade tests' and the fault matrix's).
			Breaker:   degrade.Config{ReadyToTrip: never},
			Reconcile: reconcile.Config{MaxAutoFix: -1},
			Clock:     clk,
			Wrap:      wrap,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	admin := shop(nil)
	if err := admin.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropTables(t, db, d, table, ledger) })
	cfg := systemtest.Config{
		Seed: seed,
		Node: func(_ int, wrap systemtest.Wrap) (systemtest.Flow, error) {
			return shop(wrap), nil
		},
		Gate:   admin.Gate(),
		Record: admin.Record(),
		Clock:  clk,
		Repair: func(ctx context.Context, skus []string) error {
			_, err := admin.Reconciler().Repair(ctx, skus)
			return err
		},
		Flush:   flush,
		Restart: restart,
	}
	if len(minis) > 0 {
		// The memory check needs the server's clock to pass Retention;
		// only miniredis's moves with the shop's.
		cfg.Footprint = systemtest.RedisFootprint(rc, prefix, ":state", ":users", ":skus", ":buckets")
		cfg.Retention = retention + stock.DefaultHoldTTL
	}
	if b.buckets > 1 {
		var skus []string
		for _, l := range systemtest.DefaultListings {
			l.Buckets = b.buckets
			cfg.Listings = append(cfg.Listings, l)
			skus = append(skus, l.SKU)
		}
		cfg.Lapse = leasesLapse(rc, prefix, skus, minis)
	}
	if testing.Short() {
		cfg.Steps = 60
	}
	if os.Getenv("STOCKGUARD_SYSTEMTEST_TRACE") != "" {
		cfg.Logf = t.Logf
	}
	return cfg
}

// transferLease is how long redisstock's transfer lease of a SKU split
// into buckets (key <prefix>:{sku}:bl) lives when the refill that took it
// never drops it (its node died): redisstock's bucketLease.
const transferLease = 2 * time.Second

// leasesLapse is Config.Lapse for a gate whose SKUs are split into
// buckets: it returns once no SKU has a transfer lease. While one has, it
// moves the key lifetimes of the miniredis servers (which move with the
// shop's clock alone) on by a lease's lifetime, once; on a real server it
// waits for the leases to expire. A lease still there twice its lifetime
// later is an error: it would hold off its SKU's corrections for good.
func leasesLapse(rc redis.UniversalClient, prefix string, skus []string, minis []*miniredis.Miniredis) func(context.Context) error {
	return func(ctx context.Context) error {
		until := time.Now().Add(2 * transferLease)
		for moved := false; ; {
			var held []string
			for _, sku := range skus {
				n, err := rc.Exists(ctx, prefix+":{"+sku+"}:bl").Result()
				if err != nil {
					return err
				}
				if n > 0 {
					held = append(held, sku)
				}
			}
			switch {
			case len(held) == 0:
				return nil
			case len(minis) > 0 && !moved:
				for _, m := range minis {
					m.FastForward(transferLease)
				}
				moved = true
				continue
			case time.Now().After(until):
				return fmt.Errorf("the transfer leases of %v are still held %v after the run came to rest", held, 2*transferLease)
			}
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

func dropTables(t testing.TB, db *sqlx.DB, d sqlstock.Dialect, names ...string) {
	for _, name := range append(names, names[len(names)-1]+"_ops") {
		q := `"` + name + `"`
		if d == sqlstock.MariaDB {
			q = "`" + name + "`"
		}
		_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+q)
	}
}
