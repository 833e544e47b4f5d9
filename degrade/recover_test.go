package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// sendN places n orders of one unit of sku and returns how many reached
// the primary. Every order must be taken.
func (f *fixture) sendN(prefix, sku string, n int) int64 {
	f.t.Helper()
	p, _, busy := f.spread(prefix, sku, n)
	if busy != 0 {
		f.t.Fatalf("%d of %d orders %s* were refused as busy", busy, n, prefix)
	}
	return p
}

// spread places n orders of one unit of sku and counts where each went:
// taken by the primary, taken by the fallback, or refused with ErrBusy
// (then nothing was sent to either).
func (f *fixture) spread(prefix, sku string, n int) (primary, fallback, busy int64) {
	f.t.Helper()
	p0, f0 := f.primary.Calls("Deduct"), f.fallback.Calls("Deduct")
	for i := range n {
		err := f.deduct(fmt.Sprint(prefix, i), sku, 1)
		switch {
		case errors.Is(err, degrade.ErrBusy):
			busy++
		case err != nil:
			f.t.Fatalf("Deduct %s%d: %v", prefix, i, err)
		}
	}
	primary, fallback = f.primary.Calls("Deduct")-p0, f.fallback.Calls("Deduct")-f0
	if primary+fallback+busy != int64(n) {
		f.t.Fatalf("%d orders: %d at the primary, %d at the fallback, %d busy", n, primary, fallback, busy)
	}
	return primary, fallback, busy
}

func TestRecalibrationBeforeRampAndRampSteps(t *testing.T) {
	recal := make(chan error)
	var calls atomic.Int64
	f := newFixture(t, degrade.Config{
		OpenFor: time.Minute, RampInterval: 10 * time.Second,
		Recalibrate: func(ctx context.Context, key string) error {
			calls.Add(1)
			return <-recal
		},
	})
	f.sale("a", 10000)
	f.trip("", "a")

	// Open: everything goes to the fallback until OpenFor has passed.
	f.clock.Advance(time.Minute - time.Millisecond)
	if got := f.sendN("open-", "a", 5); got != 0 {
		t.Fatalf("%d orders reached the primary while open", got)
	}
	f.clock.Advance(time.Millisecond)
	// Once recalibration begins, no order is written at the fallback
	// alone: the recalibrated primary would not know it.
	if p, fb, busy := f.spread("recal-", "a", 1); busy != 1 {
		t.Fatalf("the order that started recalibration: %d at the primary, %d at the fallback", p, fb)
	}
	f.wantEvent("", degrade.Recalibrating, 0)
	if p, fb, busy := f.spread("during-", "a", 20); busy != 20 {
		t.Fatalf("during recalibration: %d at the primary, %d at the fallback, want all busy", p, fb)
	}
	recal <- errors.New("reconcile failed")
	if e := f.wantEvent("", degrade.Degraded, 0); e.Err == nil {
		t.Fatal("a failed recalibration reported no error")
	}
	if got := f.sendN("failed-", "a", 5); got != 0 {
		t.Fatal("traffic returned after a failed recalibration")
	}
	f.clock.Advance(time.Minute)
	f.spread("retry-", "a", 1)
	f.wantEvent("", degrade.Recalibrating, 0)
	recal <- nil
	f.wantEvent("", degrade.Ramping, 0.1)
	if calls.Load() != 2 {
		t.Fatalf("Recalibrate ran %d times, want 2", calls.Load())
	}

	// 10%, then 50%, then all of it; the rest of each step is busy.
	if p, fb, busy := f.spread("r10-", "a", 50); p != 5 || fb != 0 || busy != 45 {
		t.Fatalf("at 10%%: %d at the primary, %d at the fallback, %d busy; want 5, 0, 45", p, fb, busy)
	}
	f.clock.Advance(10 * time.Second)
	if p, fb, busy := f.spread("r50-", "a", 50); p != 25 || fb != 0 || busy != 25 {
		t.Fatalf("at 50%%: %d at the primary, %d at the fallback, %d busy; want 25, 0, 25", p, fb, busy)
	}
	f.wantEvent("", degrade.Ramping, 0.5)
	f.clock.Advance(10 * time.Second)
	if got := f.sendN("r100-", "a", 20); got != 20 {
		t.Fatalf("%d of 20 orders reached the primary after the ramp, want 20", got)
	}
	f.wantEvent("", degrade.Primary, 1)
	// Each order taken went to exactly one tier.
	if p, fb := f.held(f.primary, "a"), f.held(f.fallback, "a"); p != 5+25+20 || fb != 5+5 {
		t.Fatalf("held primary %d, fallback %d; want %d, %d", p, fb, 5+25+20, 5+5)
	}
}

func TestRampStepNeedsASuccess(t *testing.T) {
	f := newFixture(t, degrade.Config{OpenFor: time.Minute, RampInterval: 10 * time.Second, RampSteps: []float64{0.5}})
	f.sale("a", 1000)
	f.trip("", "a")
	f.clock.Advance(time.Minute)
	f.spread("x", "a", 1) // starts the recalibration: busy
	f.wantEvent("", degrade.Recalibrating, 0)
	f.wantEvent("", degrade.Ramping, 0.5)
	// No traffic during the step: it does not move on when time passes.
	f.clock.Advance(time.Hour)
	if p, _, busy := f.spread("r-", "a", 1); p != 0 || busy != 1 {
		t.Fatal("the first call after an idle step went to the primary at 50%")
	}
	if s := f.d.State("a"); s != degrade.Ramping {
		t.Fatalf("state %v after an idle step, want ramping", s)
	}
}

func TestFailureDuringRampGoesBackToDegraded(t *testing.T) {
	f := newFixture(t, degrade.Config{OpenFor: time.Minute, RampSteps: []float64{0.5}})
	f.sale("a", 1000)
	f.trip("", "a")
	f.clock.Advance(time.Minute)
	f.spread("x", "a", 1) // starts the recalibration: busy
	f.wantEvent("", degrade.Recalibrating, 0)
	f.wantEvent("", degrade.Ramping, 0.5)
	f.primary.SetFault(stocktest.Down)
	if err := f.deduct("r0", "a", 1); !errors.Is(err, degrade.ErrBusy) { // not in the primary's share
		t.Fatalf("the call out of the ramp's share: %v, want ErrBusy", err)
	}
	// A failure before anything was sent is returned as it is.
	if err := f.deduct("r1", "a", 1); !errors.Is(err, stocktest.ErrInjected) || errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("primary failure during ramp: %v", err)
	}
	f.wantEvent("", degrade.Degraded, 0)
	f.primary.SetFault(stocktest.Healthy)
	if got := f.sendN("after-", "a", 10); got != 0 {
		t.Fatalf("%d orders reached the primary after one failure in the ramp", got)
	}
}

func TestPerSKUBreakersIsolateAFailingSKU(t *testing.T) {
	f := newFixture(t, degrade.Config{PerSKU: 8})
	f.sale("bad", 1000)
	f.sale("good", 1000)
	f.primary.SetFaultFor(stocktest.Down, stocktest.OnSKU("bad"))
	for i := range 5 {
		_ = f.deduct(fmt.Sprint("b", i), "bad", 1)
	}
	f.wantEvent("bad", degrade.Degraded, 0)
	if s := f.d.State("good"); s != degrade.Primary {
		t.Fatalf("good SKU's breaker is %v", s)
	}
	if got := f.sendN("g", "good", 20); got != 20 {
		t.Fatalf("%d of 20 good orders reached the primary", got)
	}
	before := f.fallback.Calls("Deduct")
	f.sendN("bb", "bad", 3)
	if f.fallback.Calls("Deduct")-before != 3 {
		t.Fatal("the bad SKU's orders did not go to the fallback")
	}
	// An order with both SKUs is busy: one breaker is open, and the other
	// SKU's primary takes traffic, which a write at the fallback alone
	// would put out of agreement with the fallback.
	o := stock.Order{ID: "both", Items: []stock.Item{{SKU: "good", Qty: 1}, {SKU: "bad", Qty: 1}}}
	if err := f.d.Deduct(t.Context(), o); !errors.Is(err, degrade.ErrBusy) || f.held(f.fallback, "good") != 0 {
		t.Fatalf("mixed order: %v", err)
	}
	if s := f.d.State("good"); s != degrade.Primary {
		t.Fatalf("good SKU's breaker is %v after a mixed order", s)
	}
}

func TestManualSwitch(t *testing.T) {
	recalibrated := make(chan string, 10)
	f := newFixture(t, degrade.Config{
		RampSteps:   []float64{},
		Recalibrate: func(_ context.Context, key string) error { recalibrated <- key; return nil },
	})
	f.sale("a", 1000)
	f.d.SetMode(degrade.ForceFallback)
	if got := f.sendN("ff", "a", 10); got != 0 || f.primary.TotalCalls() != 0 {
		t.Fatalf("ForceFallback: %d deducts reached the primary", got)
	}
	f.d.SetMode(degrade.Auto)
	if p, _, busy := f.spread("back", "a", 1); p != 0 || busy != 1 {
		t.Fatal("leaving ForceFallback skipped recalibration")
	}
	if key := <-recalibrated; key != "" {
		t.Fatalf("recalibrated %q", key)
	}
	f.wantEvent("", degrade.Degraded, 0)
	f.wantEvent("", degrade.Recalibrating, 0)
	f.wantEvent("", degrade.Primary, 1)
	if got := f.sendN("auto", "a", 10); got != 10 {
		t.Fatalf("Auto after recalibration: %d of 10 reached the primary", got)
	}

	// ForcePrimary overrides an open breaker and counts nothing.
	f.trip("", "a")
	f.d.SetMode(degrade.ForcePrimary)
	if got := f.sendN("fp", "a", 10); got != 10 {
		t.Fatalf("ForcePrimary: %d of 10 reached the primary", got)
	}
	f.primary.SetFault(stocktest.Down)
	_ = f.deduct("fp-fail", "a", 1)
	f.primary.SetFault(stocktest.Healthy)
	if f.d.Mode() != degrade.ForcePrimary {
		t.Fatal("mode changed by itself")
	}
}

// The hook is stuck; breakers keep tripping and calls keep flowing.
func TestSlowHookNeverStalls(t *testing.T) {
	release := make(chan struct{})
	var got atomic.Int64
	f := newFixture(t, degrade.Config{
		PerSKU: 100, EventBuffer: 2,
		OnStateChange: func(degrade.Event) { got.Add(1); <-release },
	})
	defer close(release)
	const skus = 20
	f.primary.SetFault(stocktest.Down)
	for s := range skus {
		sku := fmt.Sprint("s", s)
		f.sale(sku, 10)
		for i := range 5 {
			_ = f.deduct(fmt.Sprint(sku, "-", i), sku, 1)
		}
		if st := f.d.State(sku); st != degrade.Degraded {
			t.Fatalf("%s: %v", sku, st)
		}
	}
	if got.Load() > 1 {
		t.Fatalf("a stuck hook ran %d times", got.Load())
	}
	// 20 trips: one in the hook, EventBuffer in the buffer, the rest dropped.
	if d := f.d.Dropped(); d != skus-1-2 && d != skus-2 {
		t.Fatalf("dropped %d events, want %d (or %d before the hook picked one up)", d, skus-3, skus-2)
	}
}
