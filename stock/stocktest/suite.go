package stocktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// NewFunc builds a fresh, empty backend whose time is read from clock. The
// returned Manager must also implement stock.Reclaimer.
type NewFunc func(t *testing.T, clock stock.Clock) stock.Manager

// Epoch is where every suite clock starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs the whole conformance suite against backends built by
// newManager, one fresh backend per subtest.
func Run(t *testing.T, newManager NewFunc) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(newEnv(t, newManager))
		})
	}
}

type testCase struct {
	name string
	run  func(e *env)
}

// cases lists every promise the suite checks; each file of the package adds
// its own through init so the list reads by theme.
var cases []testCase

func register(name string, run func(e *env)) {
	cases = append(cases, testCase{name: name, run: run})
}

// env is one subtest's backend, clock and helpers.
type env struct {
	t     *testing.T
	m     stock.Manager
	r     stock.Reclaimer
	clock *Clock
}

func newEnv(t *testing.T, newManager NewFunc) *env {
	clock := NewClock(Epoch)
	m := newManager(t, clock)
	if m == nil {
		t.Fatal("stocktest: NewFunc returned a nil Manager")
	}
	r, ok := m.(stock.Reclaimer)
	if !ok {
		t.Fatalf("stocktest: %T does not implement stock.Reclaimer", m)
	}
	return &env{t: t, m: m, r: r, clock: clock}
}

func (e *env) ctx() context.Context { return e.t.Context() }

// sale puts sku on sale and fails the test if that fails.
func (e *env) sale(sku string, units, perUser int64, hold time.Duration) {
	e.t.Helper()
	l := stock.Listing{SKU: sku, Units: units, PerUserLimit: perUser, HoldTTL: hold}
	if err := e.m.PutOnSale(e.ctx(), l); err != nil {
		e.t.Fatalf("PutOnSale(%+v): %v", l, err)
	}
}

func (e *env) levels(sku string) stock.Levels {
	e.t.Helper()
	lv, err := e.m.Levels(e.ctx(), sku)
	if err != nil {
		e.t.Fatalf("Levels(%q): %v", sku, err)
	}
	return lv
}

// want checks the SKU's available, held and sold units, and that Available
// agrees with Levels.
func (e *env) want(sku string, avail, held, sold int64) {
	e.t.Helper()
	lv := e.levels(sku)
	if lv.Available != avail || lv.Held != held || lv.Sold != sold {
		e.t.Fatalf("%s: available/held/sold = %d/%d/%d, want %d/%d/%d",
			sku, lv.Available, lv.Held, lv.Sold, avail, held, sold)
	}
	got, err := e.m.Available(e.ctx(), sku)
	if err != nil || got != avail {
		e.t.Fatalf("Available(%q) = %d, %v; want %d", sku, got, err, avail)
	}
}

func (e *env) deduct(o stock.Order) error { return e.m.Deduct(e.ctx(), o) }

// mustDeduct places an order that must succeed.
func (e *env) mustDeduct(o stock.Order) {
	e.t.Helper()
	if err := e.deduct(o); err != nil {
		e.t.Fatalf("Deduct(%+v): %v", o, err)
	}
}

// is fails the test unless errors.Is(err, target); a nil target means no error.
func (e *env) is(err, target error, what string) {
	e.t.Helper()
	if target == nil {
		if err != nil {
			e.t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// reclaimAll runs ReclaimExpired in small batches until nothing is due and
// returns every line it reported.
func (e *env) reclaimAll() []stock.Reclaimed {
	e.t.Helper()
	var all []stock.Reclaimed
	for i := 0; ; i++ {
		got, err := e.r.ReclaimExpired(e.ctx(), 7)
		if err != nil {
			e.t.Fatalf("ReclaimExpired: %v", err)
		}
		all = append(all, got...)
		if len(got) == 0 {
			return all
		}
		if i > 100000 {
			e.t.Fatal("ReclaimExpired never ran dry")
		}
	}
}

func order(id, user string, items ...stock.Item) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: items}
}

func item(sku string, qty int64) stock.Item { return stock.Item{SKU: sku, Qty: qty} }

func oid(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// retry runs call again while it fails with stock.ErrContention or
// stock.ErrUnknownOutcome, as the contract tells callers to: both leave the
// order's state for an identical retry to settle. Concurrency cases use it,
// so a backend that reports contention on a hot row (optimistic, lock
// waits) is held to exact counts too.
func retry(call func() error) error {
	var err error
	for attempt := range 200 {
		err = call()
		if !errors.Is(err, stock.ErrContention) && !errors.Is(err, stock.ErrUnknownOutcome) {
			return err
		}
		time.Sleep(time.Duration(1+attempt%10) * time.Millisecond)
	}
	return err
}

// deductR, confirmR and revertR are the calls, retried as the contract
// allows.
func (e *env) deductR(o stock.Order) error {
	return retry(func() error { return e.deduct(o) })
}

func (e *env) confirmR(id string) error {
	return retry(func() error { return e.m.Confirm(e.ctx(), id) })
}

func (e *env) revertR(id string) error {
	return retry(func() error { return e.m.Revert(e.ctx(), id) })
}

func (e *env) reclaimR(limit int) ([]stock.Reclaimed, error) {
	var got []stock.Reclaimed
	err := retry(func() error {
		var err error
		got, err = e.r.ReclaimExpired(e.ctx(), limit)
		return err
	})
	return got, err
}
