package sqlstock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// unknownOnly fails the test unless err says the outcome is unknown, and
// nothing else: not contention (which says nothing was applied), not a
// business outcome.
func unknownOnly(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrContention) || stock.IsBusiness(err) {
		t.Fatalf("%s: %v; want stock.ErrUnknownOutcome alone", what, err)
	}
}

// Once a write may have been applied, every error says so, even when the
// re-run that would learn the outcome fails on the network too; the
// caller's own retry with the same IDs then settles it, exactly once.
func TestWriteMayHaveAppliedStaysUnknownWhenTheRerunFails(t *testing.T) {
	for _, b := range serverBackends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				db, f := openFlaky(t, b)
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Strategy: st, RetryWait: time.Millisecond})
				t.Cleanup(func() { f.down.Store(false) }) // before the tables are dropped
				ctx := t.Context()
				for _, sku := range []string{"a", "b"} {
					if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
						t.Fatal(err)
					}
				}
				two := func(id string) stock.Order {
					return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
				}
				commit := func() { f.fault.Store(faultAfterCommit) }
				steps := []struct {
					name              string
					arm               func()
					call              func() error
					avail, held, sold int64 // of SKU "a" once the call is settled
				}{
					{"Deduct, COMMIT reply lost", commit, func() error { return s.Deduct(ctx, two("o1")) }, 9, 1, 0},
					{"Confirm, COMMIT reply lost", commit, func() error { return s.Confirm(ctx, "o1") }, 9, 0, 1},
					{"Revert, COMMIT reply lost", commit, func() error { return s.Revert(ctx, "o1") }, 10, 0, 0},
					{"Restock, COMMIT reply lost", commit,
						func() error { return s.Restock(ctx, stock.Restock{OpID: "op-1", SKU: "a", Units: 5}) }, 15, 0, 0},
					{"Deduct, connection lost after an UPDATE", func() { f.armExec("UPDATE") },
						func() error { return s.Deduct(ctx, two("o2")) }, 14, 1, 0},
					{"PutOnSale, reply lost", func() { f.armExec("INSERT") },
						func() error { return s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20}) }, 20, 1, 0},
				}
				if b.dialect == sqlstock.Postgres && st == sqlstock.Atomic {
					steps = append(steps, struct {
						name              string
						arm               func()
						call              func() error
						avail, held, sold int64
					}{"one-statement Deduct, reply lost", func() { f.fault.Store(faultAfterWithExec) },
						func() error { return s.Deduct(ctx, stock.Order{ID: "o3", Items: []stock.Item{{SKU: "a", Qty: 2}}}) }, 18, 3, 0})
				}
				for _, step := range steps {
					f.downOnFault.Store(true)
					step.arm()
					err := step.call()
					if f.fault.Load() != faultNone {
						t.Fatalf("%s: the fault was never hit (%v)", step.name, err)
					}
					unknownOnly(t, step.name+", then the network down", err)
					f.down.Store(false)
					if err := step.call(); err != nil {
						t.Fatalf("%s: the caller's retry: %v", step.name, err)
					}
					lv, err := s.Levels(ctx, "a")
					if err != nil || lv.Available != step.avail || lv.Held != step.held || lv.Sold != step.sold {
						t.Fatalf("%s: levels %+v, %v; want %d/%d/%d", step.name, lv, err, step.avail, step.held, step.sold)
					}
				}
			})
		}
	}
}

// A COMMIT interrupted by the caller's context may have applied: the error
// matches stock.ErrUnknownOutcome and the context's error, never
// stock.ErrContention, which would say nothing was applied.
func TestCanceledCommitIsUnknownNotContention(t *testing.T) {
	for _, b := range serverBackends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				db, f := openFlaky(t, b)
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Strategy: st})
				// A per-user limit keeps PostgreSQL's one-statement deduct
				// (no COMMIT) out of it.
				if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
					t.Fatal(err)
				}
				o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
				calls := []struct {
					name              string
					call              func(ctx context.Context) error
					avail, held, sold int64
				}{
					{"Deduct", func(ctx context.Context) error { return s.Deduct(ctx, o) }, 8, 2, 0},
					{"Confirm", func(ctx context.Context) error { return s.Confirm(ctx, "o1") }, 8, 0, 2},
					{"Revert", func(ctx context.Context) error { return s.Revert(ctx, "o1") }, 10, 0, 0},
					{"Restock", func(ctx context.Context) error {
						return s.Restock(ctx, stock.Restock{OpID: "op-1", SKU: "a", Units: 3})
					}, 13, 0, 0},
				}
				for _, c := range calls {
					ctx, cancel := context.WithCancel(t.Context())
					f.cancel.Store(&cancel)
					f.fault.Store(faultCancelAtCommit)
					err := c.call(ctx)
					cancel()
					if f.fault.Load() != faultNone {
						t.Fatalf("%s: COMMIT was never reached (%v)", c.name, err)
					}
					unknownOnly(t, c.name+" with its COMMIT canceled", err)
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("%s with its COMMIT canceled: %v does not match context.Canceled", c.name, err)
					}
					if err := c.call(t.Context()); err != nil {
						t.Fatalf("%s retried: %v", c.name, err)
					}
					if lv, _ := s.Levels(t.Context(), "a"); lv.Available != c.avail || lv.Held != c.held || lv.Sold != c.sold {
						t.Fatalf("%s: levels %+v, want %d/%d/%d", c.name, lv, c.avail, c.held, c.sold)
					}
				}
			})
		}
	}
}
