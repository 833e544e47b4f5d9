package stockguard_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// These tests fail on purpose: each plays a Redis outage through the
// composed shop and ends with the shop breaking one of its promises. They
// are not fixed yet.

// tripShop closes the shop's Redis and places orders (each refused, with
// nothing applied) until the breaker of "phone" opens.
func tripShop(t *testing.T, shop *stockguard.Shop, close func()) {
	t.Helper()
	close()
	for i := 0; shop.State("phone") == degrade.Primary; i++ {
		if i > 10 {
			t.Fatal("the breaker never opened")
		}
		_ = shop.Deduct(t.Context(), order(fmt.Sprint("trip", i), 1))
	}
}

// A partial return made while Redis is down is applied at the record
// alone (the breaker sends RevertItems to the record path); the gate's
// copy of the order keeps all its units. Reconciliation then brings the
// gate's available count to the record's, which is right while the order
// lasts; but when the order, once paid, is refunded, the gate gives back
// every unit its copy has, the returned one included, and the record only
// what the order still took. The gate then offers a unit the record does
// not have (11 against 10 here), and nothing reports it: the refund's two
// steps both succeed, so no drift reaches Run, and the gate stays above
// the record until the next full pass.
//
// Broken promise: the gate bound (design invariant 6: "gate available <=
// record available - units in flight, after every step, not only after a
// reconcile pass"); degrade.Manager.RevertItems's doc says a return at
// the fallback alone "errs on the safe side (the gate sells less until
// reconciliation)". The RepairAll below stands for Run's full pass,
// which comes every minute, so between any payment and a later refund.
func TestReviewRefundAfterAReturnAtTheRecordAloneKeepsTheGateBound(t *testing.T) {
	shop, mr, clock := shopOn(t, stockguard.Config{Breaker: degrade.Config{RampSteps: []float64{}}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 3)); err != nil {
		t.Fatal(err)
	}
	tripShop(t, shop, mr.Close)
	// The return is refused while the gate may hold the order (a return
	// at the record alone would not reach the gate's copy), with nothing
	// written, or applied; either way the gate bound must hold after the
	// refund.
	r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}
	err := shop.RevertItems(ctx, r)
	if err != nil && !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("RevertItems while Redis is down: %v", err)
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second) // the breaker's OpenFor
	_ = shop.Deduct(ctx, order("starts-recalibration", 1))
	if s := waitState(t, shop); s != degrade.Primary {
		t.Fatalf("breaker %v after the recalibration, want primary", s)
	}
	if err := shop.RevertItems(ctx, r); err != nil { // the buyer's retry
		t.Fatalf("RevertItems once Redis is back: %v", err)
	}
	if err := shop.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if _, err := shop.Reconciler().RepairAll(ctx); err != nil { // Run's full pass
		t.Fatal(err)
	}
	if err := shop.Revert(ctx, "o1"); err != nil { // the refund
		t.Fatal(err)
	}
	if g, r := levels(t, shop.Gate()), levels(t, shop.Record()); g.Available > r.Available {
		t.Fatalf("after the refund: gate available %d above the record's %d", g.Available, r.Available)
	}
}

// After an outage in which the record alone took more than
// Config.Reconcile.MaxAutoFix units (1,000 by default: ten seconds of the
// breaker's default fallback rate, 100 orders a second, at one unit an
// order, or fewer orders of several units), the breaker's recalibration
// fails for good: the reconcile pass refuses to apply a correction that
// large (ActionLeft) and returns ErrUnresolved, the breaker stays
// degraded, and every later recalibration finds the same correction. The
// shop sells at the fallback's rate until a person repairs the gate, and
// the drift is not unexplained: each of those orders was reported by the
// flow (Drift) as taken at the record alone.
//
// Broken promise: the root doc ("while Redis fails, orders go to the
// record alone at a limited rate, and back to Redis only once it has been
// recalibrated"), and New's own claim to derive the breaker's
// recalibration: with the defaults, the recalibration cannot absorb what
// the fallback sells in one OpenFor.
func TestReviewShopReturnsToRedisAfterAnOutageThatSoldMuchAtTheRecord(t *testing.T) {
	events := make(chan degrade.Event, 64)
	shop, mr, clock := shopOn(t, stockguard.Config{Breaker: degrade.Config{
		RampSteps: []float64{}, OnStateChange: func(e degrade.Event) { events <- e },
	}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5000}); err != nil {
		t.Fatal(err)
	}
	tripShop(t, shop, mr.Close)
	for i := range 11 { // 1,100 units at the record alone, within the fallback's rate
		clock.Advance(100 * time.Millisecond)
		if err := shop.Deduct(ctx, order(fmt.Sprint("at-record", i), 100)); err != nil {
			t.Fatalf("order %d at the record alone: %v", i, err)
		}
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second) // the breaker's OpenFor
	_ = shop.Deduct(ctx, order("starts-recalibration", 1))
	guard := time.After(20 * time.Second) // a guard against hanging, not a timing assertion
	for {
		select {
		case e := <-events:
			if e.From != degrade.Recalibrating {
				continue
			}
			if e.To == degrade.Degraded {
				t.Fatalf("the recalibration after the outage failed, the breaker stays degraded: %v", e.Err)
			}
			return
		case <-guard:
			t.Fatalf("no end of the recalibration; breaker %v", shop.State("phone"))
		}
	}
}
