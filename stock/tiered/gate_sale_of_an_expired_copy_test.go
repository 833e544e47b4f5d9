package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// DESIGN invariant 6 (gate bound): gate available <= record available -
// units in flight, after every step. A sale the gate has while the
// record's copy expired (a Confirm that stopped between the tiers, then
// the record's reclaimer) is left to reconciliation (closedAtRecord and
// returnGate: "a sale the gate still has is left as it is, since
// reconciliation counted its units back into the gate ... a refund there
// would pay them out twice"). A repeat Deduct after the reconcile pass
// must not refund it at the gate again.
func TestGateSaleOfAnExpiredCopyIsNotPaidOutTwice(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	mr := miniredis.RunT(t)
	mr.SetTime(stocktest.Epoch)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	g, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("zs")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Clock: clock,
		Table: testdb.Unique("zs"), Ledger: testdb.Unique("zsl")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	record := stocktest.NewFaulty(r)
	m := tiered.New(g, record, tiered.Config{Clock: clock})
	rc, err := reconcile.New(g, r, reconcile.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
	if err := m.Confirm(ctx, "o1"); err == nil {
		t.Fatal("Confirm with the record down: nil")
	}
	record.SetFault(stocktest.Healthy)
	d := 2*time.Minute + time.Second // past the record copy's deadline
	clock.Advance(d)
	mr.SetTime(clock.Now())
	mr.FastForward(d)
	if _, err := r.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm after the record's reclaimer: %v, want %v", err, stock.ErrHoldExpired)
	}
	bound := func(when string) {
		t.Helper()
		gl, err := g.Levels(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		rl, err := r.Levels(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if gl.Available > rl.Available {
			t.Errorf("%s: gate available %d > record available %d (gate %+v, record %+v)", when, gl.Available, rl.Available, gl, rl)
		}
	}
	bound("before the reconcile pass")
	if _, err := rc.Repair(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	bound("after the reconcile pass")
	if err := m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("repeat Deduct: %v, want %v", err, stock.ErrHoldExpired)
	}
	bound("after a repeat Deduct")
}
