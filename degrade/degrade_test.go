package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

func TestConformance(t *testing.T) {
	stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
		record := memstock.New(clock)
		d := mustNew(t, tiered.New(memstock.New(clock), record, tiered.Config{Clock: clock}), nil, degrade.Config{Clock: clock})
		t.Cleanup(d.Close)
		return d
	})
}

// fixture: primary and fallback are separate stores with the same stock, so
// an order taken by both shows up as a double take.
type fixture struct {
	t                 *testing.T
	clock             *stocktest.Clock
	primary, fallback *stocktest.Faulty
	d                 *degrade.Manager
	events            chan degrade.Event
}

func newFixture(t *testing.T, cfg degrade.Config) *fixture {
	f := &fixture{t: t, clock: stocktest.NewClock(stocktest.Epoch), events: make(chan degrade.Event, 1000)}
	f.primary = stocktest.NewFaulty(memstock.New(f.clock))
	f.fallback = stocktest.NewFaulty(memstock.New(f.clock))
	cfg.Clock = f.clock
	if cfg.OnStateChange == nil {
		cfg.OnStateChange = func(e degrade.Event) { f.events <- e }
	}
	if cfg.FallbackLimit == 0 {
		cfg.FallbackLimit = rate.Inf
	}
	f.d = mustNew(t, f.primary, f.fallback, cfg)
	t.Cleanup(f.d.Close)
	return f
}

func (f *fixture) sale(sku string, units int64) {
	f.t.Helper()
	for _, m := range []stock.Manager{f.primary.Manager, f.fallback.Manager} {
		if err := m.PutOnSale(f.t.Context(), stock.Listing{SKU: sku, Units: units}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) deduct(id, sku string, qty int64) error {
	return f.d.Deduct(f.t.Context(), stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: qty}}})
}

// wait returns the next event of the breaker key, failing the test if none
// comes (the bound is a guard against hanging, not a timing assertion).
func (f *fixture) wait(key string) degrade.Event {
	f.t.Helper()
	for {
		select {
		case e := <-f.events:
			if e.Key == key {
				return e
			}
		case <-time.After(10 * time.Second):
			f.t.Fatalf("no event for breaker %q", key)
		}
	}
}

func (f *fixture) wantEvent(key string, to degrade.State, share float64) degrade.Event {
	f.t.Helper()
	e := f.wait(key)
	if e.To != to || e.Share != share {
		f.t.Fatalf("event %+v, want %v at share %v", e, to, share)
	}
	return e
}

func (f *fixture) held(m *stocktest.Faulty, sku string) int64 {
	f.t.Helper()
	lv, err := m.Manager.Levels(f.t.Context(), sku)
	if err != nil {
		f.t.Fatal(err)
	}
	return lv.Held
}

// trip fails the primary until the breaker of key opens.
func (f *fixture) trip(key, sku string) {
	f.t.Helper()
	f.primary.SetFault(stocktest.Down)
	for i := 0; f.d.State(sku) == degrade.Primary; i++ {
		if i > 100 {
			f.t.Fatal("the breaker never opened")
		}
		_ = f.deduct(fmt.Sprint("trip-", key, i), sku, 1)
	}
	f.wantEvent(key, degrade.Degraded, 0)
	f.primary.SetFault(stocktest.Healthy)
}

func TestOnlyInfrastructureFailuresOpenTheBreaker(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 1)
	if err := f.deduct("o0", "a", 1); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := f.deduct(fmt.Sprint("sold-", i), "a", 1); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("Deduct: %v, want ErrSoldOut", err)
		}
		if err := f.d.Revert(t.Context(), fmt.Sprint("ghost-", i)); !errors.Is(err, stock.ErrUnknownOrder) {
			t.Fatalf("Revert: %v, want ErrUnknownOrder", err)
		}
	}
	// The caller's own cancellation is not the primary's failure.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 50 {
		_ = f.d.Deduct(ctx, stock.Order{ID: fmt.Sprint("c-", i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
	}
	if s := f.d.State("a"); s != degrade.Primary {
		t.Fatalf("state after business outcomes and cancellations: %v", s)
	}
	if n := f.fallback.Calls("Deduct"); n != 0 {
		t.Fatalf("%d deducts reached the fallback", n)
	}
	f.primary.SetFault(stocktest.Down)
	for i := range 5 {
		if s := f.d.State("a"); s != degrade.Primary {
			t.Fatalf("opened after %d failures, want 5", i)
		}
		// Down fails before anything is sent: the error is returned as
		// it is, never as an unknown outcome.
		err := f.deduct(fmt.Sprint("f-", i), "a", 1)
		if errors.Is(err, stock.ErrUnknownOutcome) || !errors.Is(err, stocktest.ErrInjected) {
			t.Fatalf("Deduct with the primary down: %v, want the injected error as it is", err)
		}
	}
	if s := f.d.State("a"); s != degrade.Degraded {
		t.Fatalf("state after 5 failures: %v", s)
	}
	f.wantEvent("", degrade.Degraded, 0)
	f.fallback.Manager.Restock(t.Context(), stock.Restock{OpID: "op-1", SKU: "a", Units: 1})
	if err := f.deduct("new", "a", 1); err != nil {
		t.Fatalf("Deduct while degraded: %v", err)
	}
	if n := f.fallback.Calls("Deduct"); n != 1 {
		t.Fatalf("fallback got %d deducts, want 1", n)
	}
}

func TestFallbackRateLimitIsExact(t *testing.T) {
	const burst, calls = 3, 20
	f := newFixture(t, degrade.Config{FallbackLimit: rate.Every(time.Minute), FallbackBurst: burst})
	f.sale("a", 100)
	f.d.SetMode(degrade.ForceFallback)
	passed, busy := 0, 0
	for i := range calls {
		switch err := f.deduct(fmt.Sprint("o", i), "a", 1); {
		case err == nil:
			passed++
		case errors.Is(err, degrade.ErrBusy):
			busy++
		default:
			t.Fatalf("Deduct: %v", err)
		}
	}
	if passed != burst || busy != calls-burst {
		t.Fatalf("%d passed, %d busy; want %d and %d", passed, busy, burst, calls-burst)
	}
	if _, err := f.d.Levels(t.Context(), "a"); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("Levels past the limit: %v, want ErrBusy", err)
	}
	if f.held(f.fallback, "a") != burst || f.primary.TotalCalls() != 0 {
		t.Fatal("ErrBusy wrote something, or the primary was called")
	}
	f.clock.Advance(time.Minute)
	if err := f.deduct("late", "a", 1); err != nil {
		t.Fatalf("Deduct a minute later: %v", err)
	}
	if err := f.deduct("later", "a", 1); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("second Deduct a minute later: %v, want ErrBusy", err)
	}
	// Finishing an order is never refused.
	if err := f.d.Confirm(t.Context(), "o0"); err != nil {
		t.Fatalf("Confirm past the limit: %v", err)
	}
}

// A reply lost while the breaker trips: the order is taken once, on the
// primary, however often it is retried while degraded.
func TestLostReplyWhileTrippingTakesOnce(t *testing.T) {
	f := newFixture(t, degrade.Config{ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= 1 }})
	f.sale("a", 10)
	f.primary.SetFault(stocktest.LostReply)
	err := f.deduct("o1", "a", 2)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Deduct with a lost reply: %v, want ErrUnknownOutcome", err)
	}
	f.wantEvent("", degrade.Degraded, 0)
	f.primary.SetFault(stocktest.Down)
	for range 3 {
		if err := f.deduct("o1", "a", 2); !errors.Is(err, stock.ErrUnknownOutcome) || !errors.Is(err, stocktest.ErrInjected) {
			t.Fatalf("retry while degraded and the primary down: %v", err)
		}
	}
	if n := f.fallback.TotalCalls(); n != 0 {
		t.Fatalf("an order of unknown outcome reached the fallback (%d calls)", n)
	}
	f.primary.SetFault(stocktest.Healthy)
	if err := f.deduct("o1", "a", 2); err != nil {
		t.Fatalf("retry once the primary answers: %v", err)
	}
	if f.held(f.primary, "a") != 2 || f.held(f.fallback, "a") != 0 {
		t.Fatalf("held primary/fallback = %d/%d, want 2/0", f.held(f.primary, "a"), f.held(f.fallback, "a"))
	}
	// Other orders still go to the fallback while the breaker is open.
	if err := f.deduct("o2", "a", 1); err != nil || f.held(f.fallback, "a") != 1 {
		t.Fatalf("new order while degraded: %v", err)
	}
	// Confirm goes to the tier that took each order.
	if err := f.d.Confirm(t.Context(), "o1"); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Confirm(t.Context(), "o2"); err != nil {
		t.Fatal(err)
	}
	if f.held(f.primary, "a") != 0 || f.held(f.fallback, "a") != 0 {
		t.Fatal("a hold was left after Confirm")
	}
}

func TestConfirmFindsTheTakerWithoutLocalMemory(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 10)
	f.d.SetMode(degrade.ForceFallback)
	if err := f.deduct("o1", "a", 1); err != nil {
		t.Fatal(err)
	}
	// Another node: same stores, no memory of o1, primary healthy.
	other := mustNew(t, f.primary, f.fallback, degrade.Config{Clock: f.clock})
	defer other.Close()
	if err := other.Confirm(t.Context(), "o1"); err != nil {
		t.Fatalf("Confirm on another node: %v", err)
	}
	if err := other.Revert(t.Context(), "ghost"); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("Revert of an order neither tier took: %v", err)
	}
	// A node that is degraded cannot ask the primary: unknown, not "unknown order".
	other.SetMode(degrade.ForceFallback)
	if err := other.Revert(t.Context(), "ghost"); !errors.Is(err, stock.ErrUnknownOutcome) || !errors.Is(err, degrade.ErrPrimaryDown) {
		t.Fatalf("Revert while the primary is out: %v", err)
	}
}

// A primary that answers stock.ErrUnavailable (a gate that lost its data)
// fails for the breaker like any outage; the answer says nothing was
// applied, so it is returned as it is, never dressed as an unknown outcome,
// and the order does not reach the fallback while the breaker is closed.
func TestUnavailablePrimaryCountsAsAFailure(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 10)
	f.primary.SetFault(stocktest.Unavailable)
	for i := range 5 {
		if s := f.d.State("a"); s != degrade.Primary {
			t.Fatalf("opened after %d failures, want 5", i)
		}
		err := f.deduct(fmt.Sprint("u-", i), "a", 1)
		if !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
			t.Fatalf("Deduct with the primary unavailable: %v, want ErrUnavailable alone", err)
		}
	}
	if s := f.d.State("a"); s != degrade.Degraded {
		t.Fatalf("state after 5 unavailable answers: %v", s)
	}
	f.wantEvent("", degrade.Degraded, 0)
	if n := f.fallback.Calls("Deduct"); n != 0 {
		t.Fatalf("%d deducts reached the fallback before the breaker opened", n)
	}
	if err := f.deduct("new", "a", 1); err != nil || f.held(f.fallback, "a") != 1 {
		t.Fatalf("Deduct while degraded: %v", err)
	}
}

// An order whose primary outcome is unknown, then answered "unavailable"
// by the primary on the re-deduct, is still unknown (an earlier attempt
// may hold it) and never goes to the fallback.
func TestUnknownThenUnavailableStaysUnknown(t *testing.T) {
	f := newFixture(t, degrade.Config{})
	f.sale("a", 10)
	calls := 0
	f.primary.SetFaultFor(stocktest.LostReply, func(c stocktest.Call) bool {
		if c.Method != "Deduct" {
			return false
		}
		calls++
		return calls == 1
	})
	f.primary.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" && calls == 1 {
			f.primary.SetFaultFor(stocktest.Unavailable, nil)
		}
	})
	err := f.deduct("o1", "a", 2)
	f.primary.SetBefore(nil)
	if !errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrUnavailable) || !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Deduct: %v, want ErrUnknownOutcome without ErrUnavailable", err)
	}
	if n := f.fallback.TotalCalls(); n != 0 {
		t.Fatalf("an order of unknown outcome reached the fallback (%d calls)", n)
	}
	f.primary.SetFault(stocktest.Healthy)
	if err := f.deduct("o1", "a", 2); err != nil || f.held(f.primary, "a") != 2 {
		t.Fatalf("retry: %v", err)
	}
}

// mustNew is degrade.New for a test: a wiring it refuses fails the test,
// and the Manager is closed when the test ends.
func mustNew(t testing.TB, primary, fallback stock.Manager, cfg degrade.Config) *degrade.Manager {
	t.Helper()
	d, err := degrade.New(primary, fallback, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}
