package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// flowFixture is the documented wiring: degrade over a tiered flow whose
// record is the fallback, the gate behind a fault injector.
type flowFixture struct {
	t      *testing.T
	clock  *stocktest.Clock
	gate   *stocktest.Faulty
	record *stocktest.Faulty
	flow   *tiered.Manager
	d      *degrade.Manager
}

func newFlowFixture(t *testing.T, cfg degrade.Config) *flowFixture {
	f := &flowFixture{t: t, clock: stocktest.NewClock(stocktest.Epoch)}
	f.gate = stocktest.NewFaulty(memstock.New(f.clock))
	f.record = stocktest.NewFaulty(memstock.New(f.clock))
	f.flow = tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock})
	cfg.Clock = f.clock
	if cfg.FallbackLimit == 0 {
		cfg.FallbackLimit = rate.Inf
	}
	f.d = mustNew(t, f.flow, nil, cfg)
	return f
}

func (f *flowFixture) buy(id string) error {
	return f.d.Deduct(f.t.Context(), stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}})
}

func (f *flowFixture) levels(m stock.Manager) stock.Levels {
	f.t.Helper()
	lv, err := m.Levels(f.t.Context(), "a")
	if err != nil {
		f.t.Fatal(err)
	}
	return lv
}

// tripGate opens the breaker with the gate refusing connections, then
// lets the gate answer again.
func (f *flowFixture) tripGate() {
	f.t.Helper()
	f.gate.SetFault(stocktest.Down)
	for i := 0; f.d.State("a") == degrade.Primary; i++ {
		if i > 10 {
			f.t.Fatal("the breaker never opened")
		}
		_ = f.buy(fmt.Sprint("trip", i))
	}
	f.gate.SetFault(stocktest.Healthy)
}

// recordHas fails the test unless the record holds exactly the orders ids,
// each once.
func (f *flowFixture) recordHas(ids []string) {
	f.t.Helper()
	got, err := f.record.Orders(f.t.Context(), ids)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, in := range got {
		if in.State != stock.StateHeld || len(in.Items) != 1 || in.Items[0].Qty != 1 {
			f.t.Fatalf("record has %+v", in)
		}
	}
	if lv := f.levels(f.record); lv.Held != int64(len(ids)) {
		f.t.Fatalf("record holds %d units for %d orders", lv.Held, len(ids))
	}
}

// With the gate refusing connections (nothing sent), the first buyers'
// errors are returned as they are, never as unknown outcomes, and every
// buyer whose first attempt failed buys on a retry once the breaker has
// opened; each order is taken once.
func TestRefusedGateBuyersBuyOnARetry(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFault(stocktest.Down)
	var failed, ids []string
	for i := range 20 {
		id := fmt.Sprint("o", i)
		ids = append(ids, id)
		err := f.buy(id)
		switch {
		case err == nil:
		case errors.Is(err, stock.ErrUnknownOutcome):
			t.Fatalf("Deduct %s with the gate refusing connections: %v, an unknown outcome though nothing was sent", id, err)
		case errors.Is(err, stocktest.ErrInjected):
			failed = append(failed, id)
		default:
			t.Fatalf("Deduct %s: %v", id, err)
		}
	}
	if len(failed) != 5 {
		t.Fatalf("%d buyers failed before the breaker opened, want 5", len(failed))
	}
	if s := f.d.State("a"); s != degrade.Degraded {
		t.Fatalf("breaker %v", s)
	}
	for _, id := range failed {
		if err := f.buy(id); err != nil {
			t.Fatalf("retry of %s once the breaker opened: %v", id, err)
		}
	}
	f.recordHas(ids)
}

// An order whose outcome at the gate is unknown (the reply was lost after
// the gate took it) is settled at the record on a retry once the breaker
// has opened, without waiting for the gate: the record knows the order by
// its ID, so nothing is taken twice there, and the hold the gate may also
// have only makes the gate sell less.
func TestInDoubtOrderSettlesAtTheRecordWhileTheGateIsDown(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFault(stocktest.LostReply)
	var ids []string
	for i := range 3 {
		id := fmt.Sprint("doubt", i)
		ids = append(ids, id)
		if err := f.buy(id); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct %s with its reply lost: %v, want ErrUnknownOutcome", id, err)
		}
	}
	f.tripGate()
	f.gate.SetFault(stocktest.Down)
	for range 2 { // the retry, and its repeat, take it once
		for _, id := range ids {
			if err := f.buy(id); err != nil {
				t.Fatalf("retry of %s while the gate is down: %v", id, err)
			}
		}
	}
	f.recordHas(ids)
	// The gate holds the three too (the lost replies took them), never
	// more than the record: it sells less, not more.
	if g, r := f.levels(f.gate.Manager), f.levels(f.record); g.Available > r.Available {
		t.Fatalf("gate available %d above the record's %d", g.Available, r.Available)
	}
}

// The ramp back to the gate keeps the gate bound: once the gate has been
// recalibrated, the orders the breaker does not send to it are not written
// at the record alone (which would leave the gate admitting units the
// record cannot take); they are refused as busy until the ramp sends them
// to the gate.
func TestRampKeepsTheGateWithinTheRecord(t *testing.T) {
	var f *flowFixture
	f = newFlowFixture(t, degrade.Config{
		OpenFor: time.Minute, RampInterval: 10 * time.Second,
		Recalibrate: func(ctx context.Context, _ string) error { return recalibrate(ctx, f) },
	})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	f.tripGate()
	for i := range 10 { // at the record alone while the breaker is open
		if err := f.buy(fmt.Sprint("open", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Minute)
	_ = f.buy("starts-recalibration")
	for f.d.State("a") != degrade.Ramping {
		time.Sleep(time.Millisecond)
	}
	check := func(when string) {
		t.Helper()
		if g, r := f.levels(f.gate.Manager), f.levels(f.record); g.Available > r.Available {
			t.Fatalf("%s: gate available %d above the record's %d", when, g.Available, r.Available)
		}
	}
	check("after recalibration")
	taken := 0
	for i := range 20 {
		err := f.buy(fmt.Sprint("ramp", i))
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, degrade.ErrBusy):
			t.Fatalf("ramp order %d: %v", i, err)
		}
		check(fmt.Sprint("after ramp order ", i))
	}
	if taken != 2 {
		t.Fatalf("%d of 20 ramp orders taken at 10%%, want 2", taken)
	}
}

// recalibrate is the reconcile pass of the flow fixture's gate: it sets
// the gate's available count to the record's (nothing is in flight).
func recalibrate(ctx context.Context, f *flowFixture) error {
	r, err := f.record.Levels(ctx, "a")
	if err != nil {
		return err
	}
	return f.gate.Manager.PutOnSale(ctx, stock.Listing{SKU: "a", Units: r.Available, HoldTTL: f.flow.GateHold(r.HoldTTL)})
}

// A write at the record alone that is running when the breaker begins to
// recalibrate is waited for: the recalibration reads after it.
func TestRecalibrationWaitsForTheFallbacksWrites(t *testing.T) {
	seen := make(chan int64, 1)
	var f *flowFixture
	f = newFlowFixture(t, degrade.Config{
		OpenFor: time.Minute, RampSteps: []float64{},
		Recalibrate: func(ctx context.Context, _ string) error {
			seen <- f.levels(f.record).Held
			return recalibrate(ctx, f)
		},
	})
	ctx := t.Context()
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	f.tripGate()
	// A slow fallback Deduct: it stops before the record's write until let go.
	entered, release := make(chan struct{}), make(chan struct{})
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" {
			close(entered)
			<-release
		}
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := f.buy("slow"); err != nil {
			t.Errorf("the slow fallback Deduct: %v", err)
		}
	}()
	<-entered
	f.record.SetBefore(nil)
	f.clock.Advance(time.Minute)
	if err := f.buy("starts-recalibration"); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("the Deduct that starts the recalibration: %v, want ErrBusy", err)
	}
	select {
	case held := <-seen:
		t.Fatalf("the recalibration read the record (%d held) while a fallback write was running", held)
	case <-time.After(50 * time.Millisecond): // a guard: the recalibration must not start at all
	}
	close(release)
	wg.Wait()
	if held := <-seen; held != 1 {
		t.Fatalf("the recalibration read %d held at the record, want the slow order's 1", held)
	}
}

// A buyer paying late for an order the fallback took is refused on the
// node that took it as on any other, before any reclaim pass: the record's
// longer deadline is not the order's.
func TestLatePaymentOfAFallbackOrderIsRefusedEverywhere(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	ctx := t.Context()
	other := mustNew(t, f.flow, nil, degrade.Config{Clock: f.clock})
	f.d.SetMode(degrade.ForceFallback)
	if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"o1", "o2"} {
		if err := f.buy(id); err != nil {
			t.Fatal(err)
		}
	}
	f.d.SetMode(degrade.Auto)
	got, err := f.d.Orders(ctx, []string{"o1"})
	if err != nil || got[0].Deadline != stocktest.Epoch.Add(time.Minute) {
		t.Fatalf("Orders: %+v, %v; want the 1-minute deadline", got, err)
	}
	f.clock.Advance(61 * time.Second)
	for name, n := range map[string]*degrade.Manager{"taker": f.d, "other node": other} {
		if err := n.ExtendHold(ctx, "o2", f.clock.Now().Add(time.Minute)); !errors.Is(err, stock.ErrHoldExpired) {
			t.Errorf("%s: ExtendHold at 61s: %v, want ErrHoldExpired", name, err)
		}
	}
	for name, n := range map[string]*degrade.Manager{"taker": f.d, "other node": other} {
		if err := n.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
			t.Errorf("%s: Confirm at 61s: %v, want ErrHoldExpired", name, err)
		}
	}
	if lv := f.levels(f.record); lv.Sold != 0 {
		t.Fatalf("record sold %d after late payments", lv.Sold)
	}
}

// A retry in ForceFallback of an order remembered in doubt at the primary
// never calls the primary: with the flow's record as the fallback it is
// settled there; with a fallback of its own it stays unknown.
func TestForceFallbackRetryOfAnOrderInDoubtLeavesThePrimaryAlone(t *testing.T) {
	t.Run("flow", func(t *testing.T) {
		f := newFlowFixture(t, degrade.Config{})
		if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
		f.gate.SetFault(stocktest.LostReply)
		if err := f.buy("o1"); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatal(err)
		}
		f.gate.SetFault(stocktest.Healthy)
		f.d.SetMode(degrade.ForceFallback)
		before := f.gate.TotalCalls()
		if err := f.buy("o1"); err != nil {
			t.Fatalf("retry in ForceFallback: %v", err)
		}
		if n := f.gate.TotalCalls() - before; n != 0 {
			t.Fatalf("the retry called the gate %d times", n)
		}
		f.recordHas([]string{"o1"})
	})
	t.Run("own fallback", func(t *testing.T) {
		f := newFixture(t, degrade.Config{})
		f.sale("a", 10)
		f.primary.SetFault(stocktest.LostReply)
		if err := f.deduct("o1", "a", 1); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatal(err)
		}
		f.primary.SetFault(stocktest.Healthy)
		f.d.SetMode(degrade.ForceFallback)
		before := f.primary.TotalCalls()
		if err := f.deduct("o1", "a", 1); !errors.Is(err, stock.ErrUnknownOutcome) || !errors.Is(err, degrade.ErrPrimaryDown) {
			t.Fatalf("retry in ForceFallback: %v, want ErrUnknownOutcome with ErrPrimaryDown", err)
		}
		if n := f.primary.TotalCalls() - before; n != 0 || f.fallback.TotalCalls() != 0 {
			t.Fatalf("the retry called the primary %d times, the fallback %d", n, f.fallback.TotalCalls())
		}
	})
}

// Close cancels a recalibration that is running instead of waiting for it
// to time out.
func TestCloseCancelsARecalibration(t *testing.T) {
	started := make(chan struct{})
	f := newFixture(t, degrade.Config{
		OpenFor: time.Minute, RecalibrateTimeout: time.Hour,
		Recalibrate: func(ctx context.Context, _ string) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		},
	})
	f.sale("a", 10)
	f.trip("", "a")
	f.clock.Advance(time.Minute)
	_ = f.deduct("x", "a", 1)
	<-started
	closed := make(chan struct{})
	go func() { f.d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a guard against hanging; the hour is what the old code waited
		t.Fatal("Close waited for the recalibration")
	}
}

// A failed reclaim at one tier does not keep the other's from running.
func TestReclaimGoesOnPastAFailedTier(t *testing.T) {
	t.Run("own fallback", func(t *testing.T) {
		f := newFixture(t, degrade.Config{})
		ctx := t.Context()
		for _, m := range []stock.Manager{f.primary.Manager, f.fallback.Manager} {
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.deduct("o1", "a", 2); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(2 * time.Minute)
		f.fallback.SetFaultFor(stocktest.Down, stocktest.OnMethod("ReclaimExpired"))
		got, err := f.d.ReclaimExpired(ctx, 10)
		if !errors.Is(err, stocktest.ErrInjected) {
			t.Fatalf("ReclaimExpired with the fallback down: %v", err)
		}
		if len(got) != 1 || got[0].OrderID != "o1" || f.held(f.primary, "a") != 0 {
			t.Fatalf("the primary's due hold was not returned: %+v", got)
		}
	})
	t.Run("flow", func(t *testing.T) {
		// With the gate down, the record's own reclaimer still returns
		// what passed the record's deadline.
		f := newFlowFixture(t, degrade.Config{})
		ctx := t.Context()
		if err := f.d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		f.d.SetMode(degrade.ForceFallback)
		if err := f.buy("o1"); err != nil {
			t.Fatal(err)
		}
		f.gate.SetFault(stocktest.Down)
		f.clock.Advance(3 * time.Minute)
		if _, err := f.d.ReclaimExpired(ctx, 10); !errors.Is(err, stocktest.ErrInjected) {
			t.Fatalf("ReclaimExpired with the gate down: %v", err)
		}
		if lv := f.levels(f.record); lv.Held != 0 || lv.Available != 10 {
			t.Fatalf("record after the reclaim: %+v", lv)
		}
	})
}

// New refuses a flow whose fallback is not the flow's record path: the
// raw record would take orders with the gate's hold times.
func TestNewRefusesAFlowWithAnotherFallback(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	record := memstock.New(clock)
	flow := tiered.New(memstock.New(clock), record, tiered.Config{Clock: clock})
	if _, err := degrade.New(flow, record, degrade.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("New(flow, record): %v, want ErrInvalid", err)
	}
	other := tiered.New(memstock.New(clock), record, tiered.Config{Clock: clock})
	if _, err := degrade.New(flow, other.Fallback(), degrade.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("New(flow, another flow's Fallback): %v, want ErrInvalid", err)
	}
	d, err := degrade.New(flow, flow.Fallback(), degrade.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := degrade.New(memstock.New(clock), nil, degrade.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("New(store, nil): %v, want ErrInvalid", err)
	}
}

// An Observer.Breaker hook that panics on a caller's goroutine (the
// caller recovers it) does not jam the breaker: it still sends calls to
// the fallback, recalibrates and returns traffic to the primary.
func TestBreakerHookPanicLeavesTheBreakerWorking(t *testing.T) {
	obs := observe.Observer{Breaker: func(b observe.Breaker) {
		if b.To == degrade.Degraded.String() {
			panic("hook")
		}
	}}
	f := newFlowFixture(t, degrade.Config{RampSteps: []float64{}, Observer: obs})
	if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	buy := func(id string) (err error, panicked bool) {
		defer func() {
			if recover() != nil {
				panicked = true
			}
		}()
		return f.buy(id), false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.gate.SetFault(stocktest.Down)
		panics := 0
		for i := 0; panics == 0 && i < 10; i++ {
			_, p := buy(fmt.Sprint("trip", i))
			if p {
				panics++
			}
		}
		if panics != 1 {
			t.Errorf("%d hook panics while the breaker tripped", panics)
			return
		}
		f.gate.SetFault(stocktest.Healthy)
		if err, _ := buy("fallback"); err != nil || f.levels(f.record).Held != 1 {
			t.Errorf("Deduct after the panic: %v", err)
		}
		f.clock.Advance(10 * time.Second)
		if err, _ := buy("recal"); !errors.Is(err, degrade.ErrBusy) {
			t.Errorf("Deduct that starts the recalibration: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a guard against the jam
		t.Fatal("the breaker jammed after its hook panicked")
	}
	for f.d.State("a") != degrade.Primary {
		time.Sleep(time.Millisecond)
	}
	if err := f.buy("back"); err != nil || f.levels(f.gate.Manager).Held != 1 {
		t.Fatalf("Deduct after the recalibration: %v", err)
	}
}

// Every error of a call about an order names it (stock.IDError), and still
// matches the error it names.
func TestErrorsNameTheOrder(t *testing.T) {
	f := newFlowFixture(t, degrade.Config{})
	if err := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.buy("o1"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"sold out":      f.buy("o2"),
		"unknown order": f.d.Confirm(t.Context(), "ghost"),
		"revert":        f.d.Revert(t.Context(), "ghost"),
		"extend":        f.d.ExtendHold(t.Context(), "ghost", f.clock.Now().Add(time.Minute)),
	} {
		var named *stock.IDError
		if !errors.As(err, &named) || !stock.IsBusiness(err) || !strings.Contains(err.Error(), `order "`) {
			t.Errorf("%s: %v does not name its order", name, err)
		}
	}
	if err := f.buy("o2"); !errors.Is(err, stock.ErrSoldOut) || !strings.HasPrefix(err.Error(), `order "o2": `) {
		t.Errorf("sold out: %v", err)
	}
}

// refusing is a Recorder whose Admit turns every order away, as a lagging
// hand-off does.
type refusing struct{}

func (refusing) Record(context.Context, stock.Order) error { return nil }
func (refusing) Admit(context.Context, stock.Order) error  { return stock.ErrContention }

// A flow that refuses to admit (its hand-off lags) is healthy: its
// refusals reach the caller, retryable, and never trip the breaker.
func TestNotAdmittedDoesNotTrip(t *testing.T) {
	f := &flowFixture{t: t, clock: stocktest.NewClock(stocktest.Epoch)}
	f.gate = stocktest.NewFaulty(memstock.New(f.clock))
	f.record = stocktest.NewFaulty(memstock.New(f.clock))
	f.flow = tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock, Recorder: refusing{}})
	f.d = mustNew(t, f.flow, nil, degrade.Config{Clock: f.clock, FallbackLimit: rate.Inf})
	if err := f.flow.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		err := f.buy(fmt.Sprint("o", i))
		if !errors.Is(err, tiered.ErrNotAdmitted) || !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("order %d: %v, want the flow's refusal (ErrNotAdmitted, ErrContention)", i, err)
		}
	}
	if s := f.d.State("a"); s != degrade.Primary {
		t.Fatalf("breaker %v after 50 refusals to admit, want primary", s)
	}
	if lv := f.levels(f.gate); lv.Held != 0 {
		t.Fatalf("gate holds %d, want 0", lv.Held)
	}
}
