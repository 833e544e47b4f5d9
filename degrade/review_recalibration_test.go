package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// These tests fail on purpose: each shows a way a write at the fallback
// alone escapes the recalibration that is meant to read after it, so that
// traffic returns to a gate that admits more than the record can take
// (design invariant 6). They are not fixed yet.

// A PutOnSale routed to the fallback while the breaker is open, and still
// running when the breaker begins to recalibrate, is not waited for: the
// recalibration reads the record before the listing lands. Only the
// fallback's Deducts take the barrier (enterFallback); PutOnSale checks
// the breaker once, at routing, and then writes without it.
//
// Broken promise: degrade's doc ("Before traffic returns, the
// recalibration (a reconcile pass) reads the record after every such
// write this node made") and PutOnSale's own ("the recalibration would
// miss a listing written at the fallback alone"). Here the listing lowers
// the record from 100 units to 5 and the recalibrated gate keeps 100.
func TestReviewPutOnSaleAtTheFallbackIsReadByTheRecalibration(t *testing.T) {
	read := make(chan int64, 2)
	var f *flowFixture
	f = newFlowFixture(t, degrade.Config{
		OpenFor: time.Minute, RampSteps: []float64{},
		Recalibrate: func(ctx context.Context, _ string) error {
			read <- f.levels(f.record).Available
			return recalibrate(ctx, f)
		},
	})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	f.tripGate()
	// A slow PutOnSale at the fallback: it stops before the record's write
	// until let go.
	entered, release := make(chan struct{}), make(chan struct{})
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "PutOnSale" {
			close(entered)
			<-release
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5}); err != nil {
			t.Errorf("the slow PutOnSale at the fallback: %v", err)
		}
	}()
	<-entered
	f.record.SetBefore(nil)
	f.clock.Advance(time.Minute)
	if err := f.buy("starts-recalibration"); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the Deduct that starts the recalibration: %v, want ErrBusy", err)
	}
	early, seen := false, int64(0)
	select {
	case seen = <-read:
		early = true
	case <-time.After(time.Second):
		// The recalibration did not start while the listing was running.
		// (With the defect it starts at once; this wait only bounds the
		// run of the fixed code, which waits for the listing.)
	}
	close(release)
	wg.Wait()
	if early {
		t.Fatalf("the recalibration read the record (%d available) while a PutOnSale at the fallback alone was running; it lands at 5", seen)
	}
	if got := <-read; got != 5 {
		t.Fatalf("the recalibration read %d available at the record, want the listing's 5", got)
	}
}

// A recalibration that started before the operator forced the fallback
// still sends traffic back to the gate when it succeeds, although orders
// were written at the record alone after it had read the record. Leaving
// ForceFallback resets the breaker to Degraded (and starts a second
// recalibration) without invalidating the one running: its success, with
// the breaker's generation unchanged, ramps traffic back at once.
//
// Broken promise: degrade's doc ("Before traffic returns, the
// recalibration ... reads the record after every such write this node
// made"; "Leaving ForceFallback makes every breaker recalibrate and ramp
// back as after an outage"). The gate, recalibrated before the forced
// order, admits a unit the record no longer has.
func TestReviewRecalibrationOlderThanAForcedFallbackWriteReturnsNoTraffic(t *testing.T) {
	var (
		f     *flowFixture
		calls atomic.Int32
		mu    sync.Mutex
		tos   []string
		first = make(chan struct{})
	)
	f = newFlowFixture(t, degrade.Config{
		OpenFor: time.Minute, RampSteps: []float64{},
		Observer: observe.Observer{Breaker: func(b observe.Breaker) {
			if b.From == "" {
				return // the breaker's state as it was made, no change
			}
			mu.Lock()
			tos = append(tos, b.To)
			mu.Unlock()
		}},
		Recalibrate: func(ctx context.Context, _ string) error {
			if calls.Add(1) > 1 {
				<-ctx.Done() // the second recalibration runs until Close
				return ctx.Err()
			}
			defer close(first)
			if err := recalibrate(ctx, f); err != nil { // the gate agrees with the record as read now
				return err
			}
			// Meanwhile the operator forces the fallback, an order is
			// taken at the record alone, and the operator switches back.
			f.d.SetMode(degrade.ForceFallback)
			if err := f.buy("forced"); err != nil {
				t.Errorf("the order at the fallback in ForceFallback mode: %v", err)
			}
			f.d.SetMode(degrade.Auto)
			if err := f.buy("after-auto"); !errors.Is(err, degrade.ErrBusy) {
				t.Errorf("the order after leaving ForceFallback: %v, want ErrBusy (a new recalibration)", err)
			}
			return nil
		},
	})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	f.tripGate()
	f.clock.Advance(time.Minute)
	if err := f.buy("starts-recalibration"); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the Deduct that starts the recalibration: %v, want ErrBusy", err)
	}
	<-first
	f.d.Close() // waits for the first recalibration's end, cancels the second
	mu.Lock()
	defer mu.Unlock()
	for _, to := range tos {
		if to == degrade.Primary.String() || to == degrade.Ramping.String() {
			g, r := f.levels(f.gate.Manager), f.levels(f.record)
			t.Fatalf("traffic returned to the gate after a recalibration that read before the forced order (breaker changes %v): gate available %d, record %d",
				tos, g.Available, r.Available)
		}
	}
}

// With per-SKU breakers, an open breaker must not come back closed when
// other SKUs were used since (more than PerSKU): the next order of its
// SKU would go to the gate, which no recalibration has read since the
// orders written at the record alone, and the gate would admit units the
// record no longer has. Degrade's promise: "Before traffic returns, the
// recalibration ... reads the record after every such write this node
// made", and the gate bound (invariant 6).
func TestReviewForgottenOpenBreakerRecalibratesBeforeTraffic(t *testing.T) {
	d, _, gate, record, recalibrated := perSKUOneOnMemTiers(t)
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := d.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	buy := func(id string) error {
		return d.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}})
	}
	gate.SetFault(stocktest.Down)
	for i := 0; d.State("a") != degrade.Degraded; i++ {
		if i > 10 {
			t.Fatal("the breaker of a never opened")
		}
		_ = buy(fmt.Sprint("trip", i))
	}
	gate.SetFault(stocktest.Healthy)
	if err := buy("at-record"); err != nil { // at the record alone
		t.Fatal(err)
	}
	if _, err := d.Available(ctx, "b"); err != nil { // b's breaker: past PerSKU
		t.Fatal(err)
	}
	deducts := gate.Calls("Deduct")
	if err := buy("next"); err != nil && !errors.Is(err, degrade.ErrBusy) {
		t.Fatal(err)
	}
	if gate.Calls("Deduct") > deducts && len(recalibrated()) == 0 {
		g, _ := gate.Manager.Available(ctx, "a")
		r, _ := record.Manager.Available(ctx, "a")
		t.Fatalf("an order of a reached the gate with no recalibration since the order at the record alone: gate available %d, record %d", g, r)
	}
}
