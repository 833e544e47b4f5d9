package stockguard_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"modernc.org/sqlite"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// shopOn builds a Shop on a miniredis and SQLite with the test's clock
// (which also moves miniredis's key lifetimes).
func shopOn(t *testing.T, cfg stockguard.Config) (*stockguard.Shop, *miniredis.Miniredis, *stocktest.Clock) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	clock := stocktest.NewClock(stocktest.Epoch)
	cfg.Clock = clock
	shop, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	if err := shop.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	return shop, mr, clock
}

func order(id string, qty int64) stock.Order {
	return stock.Order{ID: id, Items: []stock.Item{{SKU: "phone", Qty: qty}}}
}

func levels(t *testing.T, m stock.Manager) stock.Levels {
	t.Helper()
	lv, err := m.Levels(t.Context(), "phone")
	if err != nil {
		t.Fatal(err)
	}
	return lv
}

// Every setting two parts must agree on is New's: a part Config that sets
// one is refused, naming it, and nothing is built.
func TestNewRefusesWhatItDerives(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	db := testdb.SQLite(t, 1).DB
	clock := stocktest.NewClock(stocktest.Epoch)
	obs := observe.Observer{Breaker: func(observe.Breaker) {}}
	for field, cfg := range map[string]stockguard.Config{
		"Gate.Clock":          {Gate: redisstock.Config{Clock: clock}},
		"Gate.Observer":       {Gate: redisstock.Config{Observer: obs}},
		"Record.Clock":        {Record: sqlstock.Config{Clock: clock}},
		"Record.Observer":     {Record: sqlstock.Config{Observer: obs}},
		"Flow.Clock":          {Flow: tiered.Config{Clock: clock}},
		"Flow.Observer":       {Flow: tiered.Config{Observer: obs}},
		"Breaker.Clock":       {Breaker: degrade.Config{Clock: clock}},
		"Breaker.Observer":    {Breaker: degrade.Config{Observer: obs}},
		"Breaker.Recalibrate": {Breaker: degrade.Config{Recalibrate: func(context.Context, string) error { return nil }}},
		"Reconcile.Clock":     {Reconcile: reconcile.Config{Clock: clock}},
		"Reconcile.Observer":  {Reconcile: reconcile.Config{Observer: obs}},
		"Reconcile.GateHold":  {Reconcile: reconcile.Config{GateHold: func(d time.Duration) time.Duration { return d }}},
		"Flow.RecordGrace":    {Flow: tiered.Config{RecordGrace: time.Second}, Reclaim: stock.ReclaimerConfig{Interval: 2 * time.Second}},
		"RampSteps[0]":        {Breaker: degrade.Config{RampSteps: []float64{0, 0.5}}},
	} {
		_, err := stockguard.New(rdb, db, cfg)
		if !errors.Is(err, stock.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s set: %v, want ErrInvalid naming it", field, err)
		}
	}
	if _, err := stockguard.New(nil, db, stockguard.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("nil client: %v", err)
	}
	if _, err := stockguard.New(rdb, nil, stockguard.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("nil database: %v", err)
	}
}

// A gate that lost its data is rebuilt by the Shop's reconciliation with
// the listing's own hold time, whatever grace the record holds on top.
func TestRebuiltGateKeepsTheListingsHoldTime(t *testing.T) {
	for _, grace := range []time.Duration{0, 5 * time.Minute} {
		t.Run(fmt.Sprint("grace ", grace), func(t *testing.T) {
			shop, mr, clock := shopOn(t, stockguard.Config{Flow: tiered.Config{RecordGrace: grace}})
			ctx := t.Context()
			if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			mr.FlushAll()
			if _, err := shop.Reconciler().RepairAll(ctx); err != nil {
				t.Fatal(err)
			}
			if lv := levels(t, shop.Gate()); lv.HoldTTL != 10*time.Minute || lv.Available != 10 {
				t.Fatalf("rebuilt gate: %+v, want 10 available with a 10m hold", lv)
			}
			if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
				t.Fatal(err)
			}
			got, err := shop.Orders(ctx, []string{"o1"})
			if err != nil || !got[0].Deadline.Equal(clock.Now().Add(10*time.Minute)) {
				t.Fatalf("order after the rebuild: %+v, %v; want a 10m deadline", got, err)
			}
		})
	}
}

// An order taken at the record alone (the breaker forced open) is a drift
// the Shop repairs by itself: Run brings the gate down to the record, and
// up again when the order's units come back at the record alone.
func TestRunRepairsAnOrderTakenAtTheRecordAlone(t *testing.T) {
	shop, _, clock := shopOn(t, stockguard.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- shop.Run(ctx) }()
	shop.SetMode(degrade.ForceFallback)
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if r := levels(t, shop.Record()); r.Available != 7 {
		t.Fatalf("record after the fallback's order: %+v", r)
	}
	deadline := time.Now().Add(20 * time.Second) // a guard against hanging, not a timing assertion
	for levels(t, shop.Gate()).Available != 7 {
		if time.Now().After(deadline) {
			t.Fatalf("the gate was not repaired: %+v", levels(t, shop.Gate()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Unpaid, the order comes back at the record alone (the gate never had
	// it): Run gives the gate the units back too.
	clock.Advance(time.Hour)
	if _, err := shop.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if r := levels(t, shop.Record()); r.Available != 10 {
		t.Fatalf("record after the reclaim: %+v", r)
	}
	for levels(t, shop.Gate()).Available != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("the gate did not get the returned units: %+v", levels(t, shop.Gate()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

// With the gate's Redis down (connection refused: nothing sent), the first
// buyers get errors that say nothing was applied; once the breaker has
// opened, each of them buys on a retry, at the record; when Redis is back,
// the gate is recalibrated before any order reaches it, and from then on
// it never admits more than the record can take.
func TestRedisOutageThroughTheShop(t *testing.T) {
	shop, mr, clock := shopOn(t, stockguard.Config{Breaker: degrade.Config{RampSteps: []float64{0.5}}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	var failed []string
	for i := range 10 {
		id := fmt.Sprint("o", i)
		err := shop.Deduct(ctx, order(id, 1))
		switch {
		case err == nil:
		case errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err):
			t.Fatalf("%s with Redis refusing connections: %v", id, err)
		default:
			failed = append(failed, id)
		}
	}
	if len(failed) != 5 || shop.State("phone") != degrade.Degraded {
		t.Fatalf("%d buyers failed, breaker %v; want 5 and degraded", len(failed), shop.State("phone"))
	}
	for _, id := range failed {
		if err := shop.Deduct(ctx, order(id, 1)); err != nil {
			t.Fatalf("retry of %s with the breaker open: %v", id, err)
		}
	}
	if r := levels(t, shop.Record()); r.Held != 10 || r.Available != 90 {
		t.Fatalf("record: %+v, want the 10 orders once each", r)
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second) // the breaker's OpenFor
	if err := shop.Deduct(ctx, order("starts-recalibration", 1)); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the order that starts the recalibration: %v, want ErrBusy", err)
	}
	deadline := time.Now().Add(20 * time.Second) // a guard against hanging
	for shop.State("phone") != degrade.Ramping {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %v, want ramping after the recalibration", shop.State("phone"))
		}
		time.Sleep(time.Millisecond)
	}
	bound := func(when string) {
		t.Helper()
		if g, r := levels(t, shop.Gate()), levels(t, shop.Record()); g.Available > r.Available {
			t.Fatalf("%s: gate available %d above the record's %d", when, g.Available, r.Available)
		}
	}
	bound("after the recalibration")
	for i := range 20 {
		err := shop.Deduct(ctx, order(fmt.Sprint("ramp", i), 1))
		if err != nil && !errors.Is(err, degrade.ErrBusy) {
			t.Fatalf("ramp order %d: %v", i, err)
		}
		bound(fmt.Sprint("after ramp order ", i))
	}
	if g, r := levels(t, shop.Gate()), levels(t, shop.Record()); g.Available != r.Available || r.Held != 20 {
		t.Fatalf("gate %+v, record %+v; want equal, 20 held", g, r)
	}
}

// wrapped is a driver wrapped by another, as a tracing wrapper (otelsql)
// does, opened on dsn: its type tells nothing of the database.
type wrapped struct {
	drv driver.Driver
	dsn string
}

func (w wrapped) Open(name string) (driver.Conn, error)        { return w.drv.Open(name) }
func (w wrapped) Connect(context.Context) (driver.Conn, error) { return w.drv.Open(w.dsn) }
func (w wrapped) Driver() driver.Driver                        { return w }

// New takes database/sql's *sql.DB. One whose driver's dialect it cannot
// tell is refused, having built nothing, unless Config.Record.Dialect
// names it. NewSqlx, the former constructor, still takes a *sqlx.DB.
func TestNewTakesASQLDB(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	db := sql.OpenDB(wrapped{drv: &sqlite.Driver{}, dsn: "file:" + filepath.Join(t.TempDir(), "w.db") + "?_pragma=busy_timeout(5000)"})
	t.Cleanup(func() { db.Close() })
	if _, err := stockguard.New(rdb, db, stockguard.Config{}); !errors.Is(err, stock.ErrInvalid) || !strings.Contains(err.Error(), "Dialect") {
		t.Fatalf("New over a driver it cannot tell: %v, want ErrInvalid naming the dialect", err)
	}
	shop, err := stockguard.New(rdb, db, stockguard.Config{Record: sqlstock.Config{Dialect: sqlstock.SQLite}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	ctx := t.Context()
	if err := shop.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 2}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
		t.Fatal(err)
	}
	if lv := levels(t, shop); lv.Available != 1 || lv.Held != 1 {
		t.Fatalf("levels %+v, want 1 available, 1 held", lv)
	}

	old, err := stockguard.NewSqlx(rdb, testdb.SQLite(t, 1), stockguard.Config{Gate: redisstock.Config{Prefix: "old"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Close)
	if err := old.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := stockguard.NewSqlx(rdb, nil, stockguard.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("NewSqlx over nil: %v", err)
	}
}
