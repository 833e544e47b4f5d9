package stocktest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// zzBackend builds a fresh backend of one kind, as a user would.
type zzBackend struct {
	name string
	make func(t *testing.T, clock stock.Clock) stock.Manager
}

func zzRedis(t *testing.T, c redis.UniversalClient, clock stock.Clock) *redisstock.Store {
	t.Helper()
	prefix := testdb.Unique("zzsg")
	t.Cleanup(func() {
		ctx := context.Background()
		switch c := c.(type) {
		case *redis.Client:
			testdb.DropKeys(ctx, c, prefix+":")
		case *redis.ClusterClient:
			_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				testdb.DropKeys(ctx, m, prefix+":")
				return nil
			})
		}
		_ = c.Close()
	})
	s, err := redisstock.New(c, redisstock.Config{Clock: clock, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func zzSQL(t *testing.T, db testdb.DB, st sqlstock.Strategy, clock stock.Clock) *sqlstock.Store {
	t.Helper()
	x := db.Open(t, 8)
	cfg := sqlstock.Config{Strategy: st, Dialect: db.Dialect, Clock: clock, Table: testdb.Unique("zzs"), Ledger: testdb.Unique("zzl")}
	if st == sqlstock.Optimistic {
		cfg.MaxAttempts = 100_000
	}
	s, err := sqlstock.New(x.DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tables := s.Tables()
		slices.Reverse(tables)
		for _, table := range tables {
			q := `"` + table + `"`
			if db.Dialect == sqlstock.MariaDB || db.Dialect == sqlstock.MySQL {
				q = "`" + table + "`"
			}
			_, _ = x.ExecContext(ctx, "DROP TABLE "+q)
		}
	})
	return s
}

func zzBackends() []zzBackend {
	bs := []zzBackend{{"memstock", func(t *testing.T, clock stock.Clock) stock.Manager { return memstock.New(clock) }}}
	for _, db := range testdb.All() {
		for _, st := range []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Optimistic, sqlstock.Pessimistic} {
			bs = append(bs, zzBackend{"sql-" + db.Name + "-" + st.String(), func(t *testing.T, clock stock.Clock) stock.Manager {
				testdb.Need(t, db.Needs...)
				return zzSQL(t, db, st, clock)
			}})
		}
	}
	bs = append(bs,
		zzBackend{"redis-mini", func(t *testing.T, clock stock.Clock) stock.Manager {
			m := miniredis.RunT(t)
			return zzRedis(t, redis.NewClient(&redis.Options{Addr: m.Addr()}), clock)
		}},
		zzBackend{"redis-mini-cluster", func(t *testing.T, clock stock.Clock) stock.Manager {
			m := miniredis.RunT(t)
			return zzRedis(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}}), clock)
		}},
		zzBackend{"redis-real", func(t *testing.T, clock stock.Clock) stock.Manager {
			addr := testdb.Need(t, testdb.Redis)
			return zzRedis(t, redis.NewClient(&redis.Options{Addr: addr}), clock)
		}},
		zzBackend{"redis-cluster", func(t *testing.T, clock stock.Clock) stock.Manager {
			addrs := testdb.Need(t, testdb.Cluster)
			return zzRedis(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")}), clock)
		}},
		zzBackend{"tiered-mini-sqlite", func(t *testing.T, clock stock.Clock) stock.Manager {
			m := miniredis.RunT(t)
			gate := zzRedis(t, redis.NewClient(&redis.Options{Addr: m.Addr()}), clock)
			record := zzSQL(t, testdb.All()[0], sqlstock.Atomic, clock)
			return tiered.New(gate, record, tiered.Config{Clock: clock})
		}},
		zzBackend{"tiered-real", func(t *testing.T, clock stock.Clock) stock.Manager {
			addr := testdb.Need(t, testdb.Redis, testdb.Postgres)
			gate := zzRedis(t, redis.NewClient(&redis.Options{Addr: addr}), clock)
			record := zzSQL(t, testdb.All()[2], sqlstock.Atomic, clock)
			return tiered.New(gate, record, tiered.Config{Clock: clock})
		}},
	)
	return bs
}

// zzEach runs f on every backend with a fresh clock at stocktest.Epoch.
func zzEach(t *testing.T, f func(t *testing.T, m stock.Manager, clock *stocktest.Clock)) {
	for _, b := range zzBackends() {
		t.Run(b.name, func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			f(t, b.make(t, clock), clock)
		})
	}
}
