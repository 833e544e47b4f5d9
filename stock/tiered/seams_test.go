package tiered_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// mustUnknown fails unless err is a *TierError naming tier that matches
// stock.ErrUnknownOutcome and no class that says nothing was applied or
// that the refusal is final.
func mustUnknown(t *testing.T, what string, err error, tier tiered.Tier) *tiered.TierError {
	t.Helper()
	var te *tiered.TierError
	switch {
	case !errors.As(err, &te) || te.Tier != tier:
		t.Fatalf("%s: %v, want a *TierError at the %s", what, err, tier)
	case !errors.Is(err, stock.ErrUnknownOutcome):
		t.Fatalf("%s: %v does not match ErrUnknownOutcome", what, err)
	case stock.IsBusiness(err), errors.Is(err, stock.ErrContention), errors.Is(err, stock.ErrUnavailable):
		t.Fatalf("%s: %v matches a class that contradicts ErrUnknownOutcome", what, err)
	}
	return te
}

// loseGateData replaces the gate's store with an empty one, as a Redis
// that lost its data, and puts the given SKUs on sale there again (a
// rebuilt gate) with the given units.
func (f *fixture) loseGateData(units int64, skus ...string) {
	f.gate.Manager = memstock.New(f.clock)
	for _, sku := range skus {
		if err := f.gate.Manager.PutOnSale(context.Background(), stock.Listing{SKU: sku, Units: units, HoldTTL: time.Minute}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// onCall returns a call filter matching the n-th call of method (from 1).
func onCall(method string, n int) func(stocktest.Call) bool {
	seen := 0
	return func(c stocktest.Call) bool {
		if c.Method != method {
			return false
		}
		seen++
		return seen == n
	}
}

// A restock whose gate reply was lost (or whose gate was down) is
// finished by calling Restock again with the same operation: each tier
// adds the units once.
func TestRestockRetryFinishesTheJobOnce(t *testing.T) {
	for _, fault := range []stocktest.Fault{stocktest.LostReply, stocktest.Down, stocktest.Unavailable} {
		t.Run(fault.String(), func(t *testing.T) {
			f := newFixture(t, false)
			ctx := t.Context()
			if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
			f.gate.SetFaultFor(fault, stocktest.OnMethod("Restock"))
			mustUnknown(t, "Restock with the gate failing", f.m.Restock(ctx, r), tiered.Gate)
			f.want(f.record, "record", "a", 15, 0, 0)
			f.gate.SetFault(stocktest.Healthy)
			for range 2 {
				if err := f.m.Restock(ctx, r); err != nil {
					t.Fatalf("retry: %v", err)
				}
			}
			f.want(f.gate, "gate", "a", 15, 0, 0)
			f.want(f.record, "record", "a", 15, 0, 0)
			if err := f.m.Restock(ctx, stock.Restock{OpID: "delivery-1", SKU: "a", Units: 6}); !errors.Is(err, stock.ErrConflict) {
				t.Fatalf("same operation, other units: %v, want ErrConflict", err)
			}
		})
	}
}

// A restock whose record reply was lost: the retry adds nothing more at
// the record and the units reach the gate once.
func TestRestockRetryAfterLostRecordReply(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	r := stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5}
	f.record.SetFaultFor(stocktest.LostReply, stocktest.OnMethod("Restock"))
	if err := f.m.Restock(ctx, r); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Restock with the record's reply lost: %v", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.want(f.gate, "gate", "a", 10, 0, 0)
	if err := f.m.Restock(ctx, r); err != nil {
		t.Fatalf("retry: %v", err)
	}
	f.want(f.gate, "gate", "a", 15, 0, 0)
	f.want(f.record, "record", "a", 15, 0, 0)
}

// The gate loses its data between the record write and the recheck, and
// answers stock.ErrUnavailable: the order is half-way, not refused.
func TestRecheckOnAnUnavailableGateIsUnknownOutcome(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	f.gate.SetFaultFor(stocktest.Unavailable, onCall("Deduct", 2)) // the recheck
	mustUnknown(t, "Deduct with the gate unavailable at the recheck", f.m.Deduct(ctx, ord("o1", 3)), tiered.Gate)
	f.want(f.record, "record", "a", 7, 3, 0)
	f.gate.SetFault(stocktest.Healthy)
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	f.want(f.gate, "gate", "a", 7, 0, 3)
	f.want(f.record, "record", "a", 7, 0, 3)
}

// The gate loses the order between the record write and the recheck, and
// the recheck is refused as a new order would be (an old gate answers
// unknown SKU; one rebuilt from the record, which counts the order as
// held, sold out): the record, which has the order, answers, as it does
// for the first gate step. The buyer keeps the hold (held at the record
// alone, returned at its gate deadline), not a refusal of a sale the
// record already held.
func TestRecheckOnAGateThatLostTheOrderKeepsTheRecordedHold(t *testing.T) {
	for _, c := range []struct {
		name    string
		rebuilt []string
	}{
		{"unknown SKU", nil},
		{"rebuilt sold out", []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, false)
			f.sale("a", 10, 10, 0, 0)
			ctx := t.Context()
			calls := 0
			f.gate.SetBefore(func(call stocktest.Call) {
				if call.Method == "Deduct" {
					if calls++; calls == 2 {
						f.loseGateData(0, c.rebuilt...)
					}
				}
			})
			err := f.m.Deduct(ctx, ord("o1", 3))
			f.gate.SetBefore(nil)
			if err != nil {
				t.Fatalf("Deduct whose gate lost the order at its recheck: %v, want nil (the record holds it)", err)
			}
			f.want(f.record, "record", "a", 7, 3, 0)
			if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
				t.Fatalf("a repeat: %v, want nil", err)
			}
			f.want(f.record, "record", "a", 7, 3, 0)
		})
	}
}

// Every error after the gate hold was placed matches ErrUnknownOutcome,
// so a caller following the README's switch retries; the retry finishes.
func TestErrorsAfterTheGateHoldAreUnknownOutcome(t *testing.T) {
	ctx := t.Context()
	t.Run("record down", func(t *testing.T) {
		f := newFixture(t, false)
		f.sale("a", 10, 10, 0, 0)
		f.record.SetFault(stocktest.Down)
		te := mustUnknown(t, "Deduct with the record down", f.m.Deduct(ctx, ord("o1", 3)), tiered.Record)
		if !errors.Is(te, stocktest.ErrInjected) {
			t.Fatalf("%v does not wrap the record's error", te)
		}
		f.record.SetFault(stocktest.Healthy)
		if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
			t.Fatalf("retry: %v", err)
		}
		f.want(f.record, "record", "a", 7, 3, 0)
	})
	t.Run("record contended", func(t *testing.T) {
		f := newFixture(t, false)
		f.sale("a", 10, 10, 0, 0)
		rec := &contended{Store: memstock.New(f.clock)}
		m := tiered.New(f.gate, rec, tiered.Config{Clock: f.clock})
		if err := rec.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
		mustUnknown(t, "Deduct with the record contended", m.Deduct(ctx, ord("o1", 3)), tiered.Record)
		f.want(f.gate, "gate", "a", 7, 3, 0) // the gate hold was placed: something was applied
	})
	t.Run("hand-off", func(t *testing.T) {
		f := newFixture(t, false)
		f.sale("a", 10, 10, 0, 0)
		m := tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock,
			Recorder: tiered.RecorderFunc(func(context.Context, stock.Order) error { return context.DeadlineExceeded })})
		_, err := m.Place(ctx, ord("o1", 3))
		mustUnknown(t, "Place with the hand-off failing", err, tiered.Record)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v does not wrap the queue's error", err)
		}
	})
	t.Run("record refused, gate revert failed", func(t *testing.T) {
		f := newFixture(t, false)
		f.sale("a", 10, 2, 0, 0)
		f.m = tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock, RecheckAfter: -1})
		f.gate.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
		te := mustUnknown(t, "Deduct refused with the gate's revert failing", f.m.Deduct(ctx, ord("o1", 3)), tiered.Gate)
		if !errors.Is(te.Outcome, stock.ErrSoldOut) {
			t.Fatalf("Outcome %v, want the record's ErrSoldOut", te.Outcome)
		}
		f.want(f.gate, "gate", "a", 7, 3, 0)
		f.gate.SetFault(stocktest.Healthy)
		if err := f.m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("retry: %v, want ErrSoldOut", err)
		}
		f.want(f.gate, "gate", "a", 10, 0, 0)
		f.want(f.record, "record", "a", 2, 0, 0)
	})
	t.Run("confirm not undone", func(t *testing.T) {
		f := newFixture(t, false)
		f.sale("a", 10, 10, time.Minute, time.Hour)
		if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(2 * time.Minute)
		f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
		te := mustUnknown(t, "Confirm whose record confirm cannot be undone", f.m.Confirm(ctx, "o1"), tiered.Record)
		if !errors.Is(te.Outcome, stock.ErrHoldExpired) {
			t.Fatalf("Outcome %v, want the gate's ErrHoldExpired", te.Outcome)
		}
		f.record.SetFault(stocktest.Healthy)
		if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
			t.Fatalf("retry: %v, want ErrHoldExpired", err)
		}
		f.want(f.record, "record", "a", 10, 0, 0)
	})
}

// contended is a record whose Deduct is always too busy to decide.
type contended struct{ *memstock.Store }

func (c *contended) Deduct(context.Context, stock.Order) error {
	return stock.ErrContention
}

// A payer after the deadline whose order the gate no longer remembers (the
// reclaimer returned its hold and reverted the record's copy, then the
// gate lost its data) is told the hold expired; an order reverted by a
// caller before its deadline is still closed.
func TestLatePayerOfAnOrderTheGateLostGetsHoldExpired(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"late", "canceled"} {
		if err := f.m.Deduct(ctx, ord(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.m.Revert(ctx, "canceled"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(30 * time.Second)
	f.loseGateData(10, "a")
	if err := f.m.Confirm(ctx, "canceled"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm of a reverted order: %v, want ErrOrderClosed", err)
	}

	f = newFixture(t, false)
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("late", 1)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second)
	if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("ReclaimExpired = %v, %v; want the one hold", got, err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	f.gate.SetFaultFor(stocktest.Unavailable, stocktest.OnMethod("Confirm"))
	if err := f.m.Confirm(ctx, "late"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("late Confirm with the gate unavailable: %v, want ErrHoldExpired", err)
	}
	f.gate.SetFault(stocktest.Healthy)
	f.loseGateData(10, "a")
	if err := f.m.Confirm(ctx, "late"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("late Confirm of an order the gate lost: %v, want ErrHoldExpired", err)
	}
}

// New asks in its types for every interface the flow uses, so a wrapper
// that drops one (and would make the reclaimer revert confirmed sales) is
// refused when the program is built.
func TestNewAsksForWhatTheFlowUses(t *testing.T) {
	nt := reflect.TypeOf(tiered.New)
	gate, record := nt.In(0), nt.In(1)
	for _, c := range []struct {
		name string
		tier reflect.Type
		want reflect.Type
	}{
		{"gate", gate, reflect.TypeFor[stock.Reclaimer]()},
		{"gate", gate, reflect.TypeFor[stock.OrderReader]()},
		{"record", record, reflect.TypeFor[stock.Reclaimer]()},
		{"record", record, reflect.TypeFor[stock.OrderReader]()},
		{"record", record, reflect.TypeFor[stock.HoldLister]()},
	} {
		if !c.tier.Implements(c.want) {
			t.Errorf("tiered.New takes a %s of type %v, which does not require %v", c.name, c.tier, c.want)
		}
	}
}

// The follow-up returns a record copy the gate lost (a flush) once the
// order's gate deadline has passed, not before, and leaves alone a copy
// the gate sold.
func TestFollowUpReturnsCopiesTheGateLostAfterTheirDeadline(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("lost", 3)); err != nil {
		t.Fatal(err)
	}
	f.loseGateData(7, "a")
	if err := f.m.Deduct(ctx, ord("sold", 2)); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.Confirm(ctx, "sold"); err != nil { // a Confirm that reached the gate only
		t.Fatal(err)
	}
	f.clock.Advance(59 * time.Second)
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	f.want(f.record, "record", "a", 5, 5, 0) // both still held
	f.clock.Advance(time.Second)             // lost's gate deadline
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// lost returned; sold, confirmed at the gate only, finished as a sale
	// at the record (never returned)
	f.want(f.record, "record", "a", 8, 0, 2)
	f.want(f.gate, "gate", "a", 5, 0, 2)
}

// A gate that lost its data and was rebuilt refuses a repeat of an order
// it told yes as if it were new (sold out: the rebuilt gate counts the
// record's hold as taken). The record has the order, so the repeat gets
// what a repeat gets: nil, ErrConflict for another user, ErrHoldExpired
// (the copy returned) once the gate deadline has passed.
func TestRepeatOfARecordedOrderAfterTheGateLostIt(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.loseGateData(0, "a") // rebuilt from the record: 0 available
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatalf("repeat of a recorded order the gate lost: %v, want nil", err)
	}
	other := ord("o1", 3)
	other.UserID = "u2"
	if err := f.m.Deduct(ctx, other); !errors.Is(err, stock.ErrConflict) {
		t.Fatalf("same ID, another user: %v, want ErrConflict", err)
	}
	if err := f.m.Deduct(ctx, ord("new", 1)); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("a new order: %v, want ErrSoldOut", err)
	}
	f.want(f.record, "record", "a", 0, 3, 0)
	f.clock.Advance(time.Minute)
	if err := f.m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("repeat past the gate deadline: %v, want ErrHoldExpired", err)
	}
	f.want(f.record, "record", "a", 3, 0, 0)
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Orders"))
	mustUnknown(t, "a refusal with the record unreadable", f.m.Deduct(ctx, ord("o2", 1)), tiered.Record)
}

// A cancel while the gate is unavailable (it lost its data) is done at the
// record; an order neither tier can vouch for stays an error to retry.
func TestRevertWithTheGateUnavailable(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, time.Minute, 2*time.Minute)
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFault(stocktest.Unavailable)
	if err := f.m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert with the gate unavailable: %v, want nil (done at the record)", err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Revert(ctx, "ghost"); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("Revert of an order the record does not know: %v, want ErrUnavailable", err)
	}
	f.gate.SetFault(stocktest.Healthy)
	if err := f.m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Deduct of the reverted order: %v, want ErrOrderClosed", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
}

// With a queued hand-off, a repeat of an order the record already has,
// refused by a gate that lost it, is placed: Recorded, nothing queued.
func TestAsyncRepeatOfARecordedOrderAfterTheGateLostIt(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Settle(ctx, f.queue[0]); err != nil {
		t.Fatal(err)
	}
	f.loseGateData(0, "a")
	p, err := f.m.Place(ctx, ord("o1", 3))
	if err != nil || p != tiered.Recorded || len(f.queue) != 1 {
		t.Fatalf("Place of a recorded order the gate lost = %v, %v (%d queued); want recorded, nil, nothing queued", p, err, len(f.queue)-1)
	}
}
