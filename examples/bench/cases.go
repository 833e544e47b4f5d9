package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

const units = 10_000_000 // on sale per run: no case sells out

var errRawSoldOut = errors.New("raw: sold out")

// isRefusal reports a call the store refused without failing: contention
// (optimistic retries used up, lock waits) or, never expected, sold out.
func isRefusal(err error) bool {
	return errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrSoldOut) || errors.Is(err, errRawSoldOut)
}

// rawDeduct is the minimal check-and-DECRBY script every Redis figure is
// compared with.
var rawDeduct = redis.NewScript(`local v = tonumber(redis.call('GET', KEYS[1]))
if v and v >= tonumber(ARGV[1]) then redis.call('DECRBY', KEYS[1], ARGV[1]) return 1 end
return 0`)

// shape is the orders the cases deduct.
type shape struct {
	anonymous bool // no UserID, no per-user limit
}

// listing puts units of sku on sale, with a per-user limit of 1 unless
// the orders are anonymous.
func (sh shape) listing(sku string) stock.Listing {
	l := stock.Listing{SKU: sku, Units: units, HoldTTL: time.Hour}
	if !sh.anonymous {
		l.PerUserLimit = 1
	}
	return l
}

// order is the order id of items, of its own user unless the orders are
// anonymous.
func (sh shape) order(id string, items []stock.Item) stock.Order {
	o := stock.Order{ID: id, Items: items}
	if !sh.anonymous {
		o.UserID = userOf(id)
	}
	return o
}

// userOf is the UserID of the order id: one user per order.
func userOf(id string) string { return "u" + id }

// setup connects to every store the options name and returns their cases,
// the memory figures of the Redis servers, and a cleanup that removes what
// the run created.
func setup(ctx context.Context, opt options) ([]group, []memResult, func(), error) {
	tag := "sgbench" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	var groups []group
	var memory []memResult
	sh := shape{anonymous: opt.anonymous}
	pool := max(128, slices.Max(opt.clients)) // the raw script at its best: a connection per client

	if opt.redis != "none" {
		g, m, err := redisSetup(ctx, opt.redis, tag, pool, sh, &cleanups)
		if err != nil {
			return nil, nil, cleanup, err
		}
		groups = append(groups, g)
		memory = append(memory, m...)
	}
	if len(opt.cluster) > 0 {
		g, m, err := clusterSetup(ctx, opt.cluster, tag, pool, sh, &cleanups)
		if err != nil {
			return nil, nil, cleanup, err
		}
		groups = append(groups, g)
		memory = append(memory, m...)
	}

	type sqlTarget struct{ store, driver, dsn string }
	var targets []sqlTarget
	if opt.mysql != "" && opt.mysql != "none" {
		targets = append(targets, sqlTarget{"MySQL", "mysql", opt.mysql})
	}
	if opt.postgres != "" {
		targets = append(targets, sqlTarget{"PostgreSQL", "pgx", opt.postgres})
	}
	if len(targets) == 0 && opt.mysql != "none" {
		dir, err := os.MkdirTemp("", "sgbench")
		if err != nil {
			return nil, nil, cleanup, err
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		dsn := "file:" + filepath.Join(dir, "bench.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
		targets = append(targets, sqlTarget{"SQLite", "sqlite", dsn})
	}
	for _, t := range targets {
		db, err := sqlx.Open(t.driver, t.dsn)
		if err != nil {
			return nil, nil, cleanup, err
		}
		db.SetMaxOpenConns(128)
		db.SetMaxIdleConns(128)
		cleanups = append(cleanups, func() { db.Close() })
		g, drop, err := sqlGroup(ctx, db, t.store, tag, sh)
		cleanups = append(cleanups, drop)
		if err != nil {
			return nil, nil, cleanup, fmt.Errorf("%s: %w", t.store, err)
		}
		groups = append(groups, g)
	}
	return groups, memory, cleanup, nil
}

// redisSetup connects to addr, or to an in-process miniredis when addr is
// empty, and returns its cases and, on a real Redis, its memory figure.
func redisSetup(ctx context.Context, addr, tag string, pool int, sh shape, cleanups *[]func()) (group, []memResult, error) {
	store := "Redis"
	if addr == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return group{}, nil, err
		}
		*cleanups = append(*cleanups, mr.Close)
		addr, store = mr.Addr(), "miniredis"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool})
	*cleanups = append(*cleanups, func() { testdb.DropKeys(ctx, rdb, tag); rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		return group{}, nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	var server func(context.Context) (serverStats, error)
	var memory []memResult
	if store == "Redis" { // miniredis reports neither CPU nor memory
		server = func(ctx context.Context) (serverStats, error) { return redisStats(ctx, rdb) }
		m, err := memoryPerHold(ctx, rdb, store, tag+"mem", memHolds)
		if err != nil {
			return group{}, nil, err
		}
		memory = append(memory, m)
	}
	g, err := redisGroup(rdb, store, tag, sh, server)
	return g, memory, err
}

func redisGroup(rdb *redis.Client, store, tag string, sh shape, server func(context.Context) (serverStats, error)) (group, error) {
	g, s, batches, err := deductGroup(rdb, store, tag, sh, server)
	if err == nil {
		c := orderCase("redisstock Deduct, 3-item order", s, sh, 3)
		c.server, c.batches = server, batches
		g.cases = append(g.cases, c)
	}
	return g, err
}

// deductGroup is the raw script, Deduct (batched, the default) and
// Deduct with MaxBatch 1 on one hot SKU of rdb, each reading the server's
// counters with server; it returns the batching Store too, and the counts
// of its batches.
func deductGroup(rdb redis.UniversalClient, store, tag string, sh shape, server func(context.Context) (serverStats, error)) (group, *redisstock.Store, *batchStats, error) {
	var batches, singles batchStats
	s, err := redisstock.New(rdb, redisstock.Config{Prefix: tag, Observer: batches.observer()})
	if err != nil {
		return group{}, nil, nil, err
	}
	single, err := redisstock.New(rdb, redisstock.Config{Prefix: tag + "s", MaxBatch: 1, Observer: singles.observer()})
	if err != nil {
		return group{}, nil, nil, err
	}
	const deduct = "redisstock Deduct"
	g := group{store: store, cases: []benchCase{
		rawCase(rdb, tag+":{hot}:raw"),
		managerCase(deduct, s, sh, 1),
		managerCase("redisstock Deduct, MaxBatch 1", single, sh, 1),
	}}
	g.cases[1].batches, g.cases[2].batches = &batches, &singles
	g.cases[2].vs = []string{deduct}
	for i := range g.cases {
		g.cases[i].server = server
	}
	return g, s, &batches, nil
}

// clusterSetup connects to a Redis Cluster and returns its cases: the raw
// script and Deduct, each on one hot SKU (one slot, one master), the
// server CPU summed over the masters.
func clusterSetup(ctx context.Context, addrs []string, tag string, pool int, sh shape, cleanups *[]func()) (group, []memResult, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: pool})
	*cleanups = append(*cleanups, func() {
		rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { testdb.DropKeys(ctx, c, tag); return nil })
		rdb.Close()
	})
	if err := rdb.Ping(ctx).Err(); err != nil {
		return group{}, nil, fmt.Errorf("redis cluster %v: %w", addrs, err)
	}
	server := func(ctx context.Context) (serverStats, error) {
		var mu sync.Mutex
		var total serverStats
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			st, err := redisStats(ctx, c)
			mu.Lock()
			total = total.plus(st)
			mu.Unlock()
			return err
		})
		return total, err
	}
	m, err := memoryPerHold(ctx, rdb, "Redis Cluster", tag+"mem", memHolds)
	if err != nil {
		return group{}, nil, err
	}
	g, _, _, err := deductGroup(rdb, "Redis Cluster", tag, sh, server)
	return g, []memResult{m}, err
}

// rawCase is the raw check-and-DECRBY script on key, one call per deduct.
func rawCase(rdb redis.UniversalClient, key string) benchCase {
	return benchCase{
		name: "raw EVALSHA check+DECRBY",
		prep: func(ctx context.Context) error { return rdb.Set(ctx, key, units, 0).Err() },
		op: func(ctx context.Context, _ int64) error {
			n, err := rawDeduct.Run(ctx, rdb, []string{key}, 1).Int()
			if err == nil && n == 0 {
				err = errRawSoldOut
			}
			return err
		},
	}
}

// memResult is the Redis memory one live hold costs.
type memResult struct {
	store   string
	holds   int
	perHold float64  // bytes, from used_memory
	keys    []keyMem // by key, from MEMORY USAGE
}

// keyMem is what one key of the Store's takes per hold: its name less the
// Store's prefix, and its MEMORY USAGE over the holds.
type keyMem struct {
	name    string
	perHold float64
}

// memHolds is how many holds memoryPerHold places.
const memHolds = 100_000

// memoryPerHold places holds holds of one unit of one SKU on rdb (one
// server, or a Cluster: every master counted), each order of its own user
// (with a per-user limit, so each adds a user count), and returns the
// growth of the servers' used_memory per hold, and what each of the
// Store's keys takes (keyMemory). Its keys go with the run's cleanup
// (prefix starts with the run's tag).
func memoryPerHold(ctx context.Context, rdb redis.UniversalClient, store, prefix string, holds int) (memResult, error) {
	s, err := redisstock.New(rdb, redisstock.Config{Prefix: prefix})
	if err != nil {
		return memResult{}, err
	}
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: int64(holds), PerUserLimit: 1, HoldTTL: time.Hour}); err != nil {
		return memResult{}, err
	}
	used := func() (total float64, err error) {
		err = eachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
			info := func(ctx context.Context) (string, error) { return c.Info(ctx, "memory").Result() }
			m, err := settledMemory(ctx, info, 50*time.Millisecond)
			total += m
			return err
		})
		return total, err
	}
	before, err := used()
	if err != nil {
		return memResult{}, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for n := next.Add(1); n <= int64(holds); n = next.Add(1) {
				id := strconv.FormatInt(n, 10)
				o := stock.Order{ID: "m" + id, UserID: "user-" + id, Items: []stock.Item{{SKU: "hot", Qty: 1}}}
				if err := s.Deduct(ctx, o); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return memResult{}, fmt.Errorf("memory per hold: %w", err)
	}
	after, err := used()
	if err != nil {
		return memResult{}, err
	}
	keys, err := keyMemory(ctx, rdb, prefix, holds)
	if err != nil {
		return memResult{}, err
	}
	return memResult{store: store, holds: holds, perHold: (after - before) / float64(holds), keys: keys}, nil
}

// keyMemory is the MEMORY USAGE (every element counted) of each key under
// prefix over holds, largest first, leaving out keys of under half a byte
// a hold (the SKU's state, the registry). The directory's shards count as
// one key (dir:{*}, and dir:{*}:open and the like).
func keyMemory(ctx context.Context, rdb redis.UniversalClient, prefix string, holds int) ([]keyMem, error) {
	by := map[string]int64{}
	err := eachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			n, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				return fmt.Errorf("MEMORY USAGE %s: %w", iter.Val(), err)
			}
			by[dirShard.ReplaceAllString(strings.TrimPrefix(iter.Val(), prefix+":"), "dir:{*}")] += n
		}
		return iter.Err()
	})
	if err != nil {
		return nil, err
	}
	var keys []keyMem
	for name, n := range by {
		if per := float64(n) / float64(holds); per >= 0.5 {
			keys = append(keys, keyMem{name: name, perHold: per})
		}
	}
	slices.SortFunc(keys, func(a, b keyMem) int { return cmp.Or(cmp.Compare(b.perHold, a.perHold), cmp.Compare(a.name, b.name)) })
	return keys, nil
}

// dirShard matches a directory shard's name: the shards are one key in
// keyMemory's figures.
var dirShard = regexp.MustCompile(`^dir:\{[^}]*\}`)

// eachMaster runs f on rdb's server, or on each master of a Cluster, one
// at a time.
func eachMaster(ctx context.Context, rdb redis.UniversalClient, f func(ctx context.Context, c *redis.Client) error) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		c, ok := rdb.(*redis.Client)
		if !ok {
			return fmt.Errorf("memory: a %T is neither a server nor a Cluster", rdb)
		}
		return f(ctx, c)
	}
	var mu sync.Mutex
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return f(ctx, c)
	})
}

// String is the memory line of the report.
func (m memResult) String() string {
	by := make([]string, len(m.keys))
	for i, k := range m.keys {
		by[i] = fmt.Sprintf("%s %.0f", k.name, k.perHold)
	}
	return fmt.Sprintf("%s: %.0f bytes of Redis memory per live hold (%d holds of one SKU, distinct users; INFO memory before and after); by key, MEMORY USAGE per hold: %s",
		m.store, m.perHold, m.holds, strings.Join(by, ", "))
}

// settledMemory is the server's used_memory once it has no object left to
// free in the background (the keys of an earlier run, UNLINKed, are freed
// after UNLINK answers): it reads INFO memory with info every poll until
// lazyfree_pending_objects is 0, at most 200 times.
func settledMemory(ctx context.Context, info func(ctx context.Context) (string, error), poll time.Duration) (float64, error) {
	for range 200 {
		text, err := info(ctx)
		if err != nil {
			return 0, err
		}
		var used, pending string
		for _, line := range strings.Split(text, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				switch k {
				case "used_memory":
					used = v
				case "lazyfree_pending_objects":
					pending = v
				}
			}
		}
		if pending == "" || pending == "0" {
			n, err := strconv.ParseInt(used, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO memory used_memory: %w", err)
			}
			return float64(n), nil
		}
		if err := sleep(ctx, poll); err != nil {
			return 0, err
		}
	}
	return 0, errors.New("INFO memory: objects still pending a background free after 200 reads")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// managerCase deducts one unit per call through a stock.Manager, of one
// hot SKU, or of skus SKUs in turn, in orders of shape sh.
func managerCase(name string, m stock.Manager, sh shape, skus int) benchCase {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	names := make([]string, skus)
	for i := range names {
		names[i] = "hot"
		if skus > 1 {
			names[i] = "sku-" + strconv.Itoa(i)
		}
	}
	return benchCase{
		name: name,
		prep: func(ctx context.Context) error {
			run = strconv.FormatInt(time.Now().UnixNano(), 36)
			for _, sku := range names {
				if err := m.PutOnSale(ctx, sh.listing(sku)); err != nil {
					return err
				}
			}
			return nil
		},
		op: func(ctx context.Context, seq int64) error {
			id := run + "-" + strconv.FormatInt(seq, 10)
			sku := names[seq%int64(len(names))]
			return m.Deduct(ctx, sh.order(id, []stock.Item{{SKU: sku, Qty: 1}}))
		},
	}
}

// orderCase deducts one unit of each of n SKUs per call: one order of n
// lines, of shape sh.
func orderCase(name string, m stock.Manager, sh shape, n int) benchCase {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	items := make([]stock.Item, n)
	for i := range items {
		items[i] = stock.Item{SKU: "line-" + strconv.Itoa(i), Qty: 1}
	}
	return benchCase{
		name: name,
		prep: func(ctx context.Context) error {
			run = strconv.FormatInt(time.Now().UnixNano(), 36)
			for _, it := range items {
				if err := m.PutOnSale(ctx, sh.listing(it.SKU)); err != nil {
					return err
				}
			}
			return nil
		},
		op: func(ctx context.Context, seq int64) error {
			return m.Deduct(ctx, sh.order(run+"-"+strconv.FormatInt(seq, 10), items))
		},
	}
}

func sqlGroup(ctx context.Context, db *sqlx.DB, store, tag string, sh shape) (group, func(), error) {
	var dropped []string
	drop := func() {
		for _, t := range dropped {
			db.Exec("DROP TABLE IF EXISTS " + t)
		}
	}
	dialect := sqlstock.Dialect(0)
	if db.DriverName() == "mysql" {
		var v string
		if err := db.GetContext(ctx, &v, "SELECT VERSION()"); err != nil {
			return group{}, drop, err
		}
		dialect = sqlstock.MySQL
		if strings.Contains(v, "MariaDB") {
			dialect, store = sqlstock.MariaDB, "MariaDB"
		}
	}
	rawStock, rawLedger := tag+"_raw", tag+"_rawledger"
	dropped = append(dropped, rawStock, rawLedger)
	for _, q := range []string{
		"CREATE TABLE " + rawStock + " (sku VARCHAR(64) PRIMARY KEY, available BIGINT NOT NULL)",
		"CREATE TABLE " + rawLedger + " (order_id VARCHAR(64) PRIMARY KEY, sku VARCHAR(64) NOT NULL, qty BIGINT NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return group{}, drop, err
		}
	}
	update := db.Rebind("UPDATE " + rawStock + " SET available = available - 1 WHERE sku = ? AND available >= 1")
	insert := db.Rebind("INSERT INTO " + rawLedger + " (order_id, sku, qty) VALUES (?, 'hot', 1)")
	prep := func(ctx context.Context) error {
		if _, err := db.ExecContext(ctx, "DELETE FROM "+rawStock); err != nil {
			return err
		}
		_, err := db.ExecContext(ctx, db.Rebind("INSERT INTO "+rawStock+" (sku, available) VALUES ('hot', ?)"), units)
		return err
	}
	taken := func(res interface{ RowsAffected() (int64, error) }) error {
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(errRawSoldOut, err)
		}
		return nil
	}
	g := group{store: store, baseline: 1, cases: []benchCase{
		{name: "raw UPDATE … WHERE available >= 1", prep: prep, op: func(ctx context.Context, _ int64) error {
			res, err := db.ExecContext(ctx, update, "hot")
			if err != nil {
				return err
			}
			return taken(res)
		}},
		{name: "raw tx: INSERT ledger + UPDATE", prep: prep, op: func(ctx context.Context, seq int64) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, insert, tag+strconv.FormatInt(seq, 36)); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, update, "hot")
			if err != nil {
				return err
			}
			if err := taken(res); err != nil {
				return err
			}
			return tx.Commit()
		}},
	}}
	const (
		rawUpdate   = "raw UPDATE … WHERE available >= 1"
		ungrouped   = "sqlstock atomic ungrouped"
		ungrouped1k = "sqlstock atomic ungrouped, 1,000 SKUs"
		grouped1k   = "sqlstock atomic grouped, 1,000 SKUs"
	)
	variants := []struct {
		name           string
		st             sqlstock.Strategy
		maxGroup, skus int
		vs             []string
	}{
		{"sqlstock atomic grouped", sqlstock.Atomic, 0, 1, []string{rawUpdate, ungrouped}},
		{ungrouped, sqlstock.Atomic, 1, 1, []string{rawUpdate}},
		{"sqlstock optimistic", sqlstock.Optimistic, 0, 1, nil},
		{"sqlstock pessimistic", sqlstock.Pessimistic, 0, 1, nil},
		{grouped1k, sqlstock.Atomic, 0, 1000, []string{ungrouped1k}},
		{ungrouped1k, sqlstock.Atomic, 1, 1000, nil},
	}
	for i, v := range variants {
		table, ledger := tag+"_"+strconv.Itoa(i), tag+"_"+strconv.Itoa(i)+"_ledger"
		batches := new(batchStats)
		s, err := sqlstock.New(db.DB, sqlstock.Config{Strategy: v.st, Dialect: dialect, Table: table, Ledger: ledger,
			MaxAttempts: 3, MaxGroup: v.maxGroup, Observer: batches.observer()})
		if err != nil {
			return group{}, drop, err
		}
		dropped = append(dropped, s.Tables()...)
		if err := s.CreateTables(ctx); err != nil {
			return group{}, drop, err
		}
		c := managerCase(v.name, s, sh, v.skus)
		c.vs, c.batches = v.vs, batches
		g.cases = append(g.cases, c)
	}
	return g, drop, nil
}
