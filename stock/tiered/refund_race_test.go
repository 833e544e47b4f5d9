package tiered_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// newFixtureOn is newFixture (synchronous) with the record on backend:
// "memstock", or "sqlite" (sqlstock).
func newFixtureOn(t *testing.T, backend string) *fixture {
	f := &fixture{t: t, clock: stocktest.NewClock(stocktest.Epoch)}
	var record stock.Manager = memstock.New(f.clock)
	if backend == "sqlite" {
		s, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Clock: f.clock,
			Table: testdb.Unique("rr"), Ledger: testdb.Unique("rrl")})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTables(context.Background()); err != nil {
			t.Fatal(err)
		}
		record = s
	}
	f.gate = stocktest.NewFaulty(memstock.New(f.clock))
	f.record = stocktest.NewFaulty(record)
	f.m = tiered.New(f.gate, f.record, tiered.Config{Clock: f.clock,
		OnDrift: func(d tiered.Drift) { f.drift = append(f.drift, d) }})
	return f
}

// revertCall matches a call that returns the record's copy of id.
func revertCall(c stocktest.Call, id string) bool {
	return (c.Method == "Revert" || c.Method == "RevertHeld") && c.OrderID == id
}

// A buyer's Confirm that returns nil is a sale, whatever the flow was
// doing with the record's copy at that moment. Each case reaches a step
// where the flow read the copy as held and is about to return it (its
// gate hold ended, or the gate lost the order), and a Confirm of the same
// order runs right there: the gate no longer knows the order, so the
// record decides by the gate deadline, which has not passed, and confirms.
// The flow's return of the copy must then leave the sale alone: the record
// ends with the order confirmed, never refunded, and the flow's own answer
// is no business refusal (which would say the order holds nothing).
func TestInternalRevertNeverRefundsAConfirmedSale(t *testing.T) {
	type race struct {
		f         *fixture
		fired     bool
		confirmed error
	}
	// confirmAt runs the buyer's Confirm of o1 once, from a record hook,
	// at the first call match accepts: pre runs just before it, post
	// just after.
	confirmAt := func(r *race, match func(stocktest.Call) bool, pre, post func()) {
		r.f.record.SetBefore(func(c stocktest.Call) {
			if r.fired || !match(c) {
				return
			}
			r.fired = true
			if pre != nil {
				pre()
			}
			r.confirmed = r.f.m.Confirm(context.Background(), "o1")
			if post != nil {
				post()
			}
		})
	}
	reverting := func(c stocktest.Call) bool { return revertCall(c, "o1") }
	// revertFailed leaves o1 reverted at the gate and held at the record:
	// a Revert whose record step failed.
	revertFailed := func(r *race) {
		r.f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
		if err := r.f.m.Revert(r.f.t.Context(), "o1"); err == nil {
			r.f.t.Fatal("Revert with the record down: nil")
		}
		r.f.record.SetFault(stocktest.Healthy)
	}
	cases := []struct {
		name string
		// placed says whether o1 is placed before the race.
		placed bool
		// arm sets up the race; act is the flow's call that meets it.
		arm func(r *race)
		act func(r *race) error
	}{{
		// A repeat of the order, refused by a gate that lost it: the
		// record holds it, and the flow reads the copy, then the time,
		// and returns the copy if its gate deadline has passed. The
		// Confirm lands between the read and the clock, just before the
		// deadline.
		name:   "repeat refused by a gate that lost the order",
		placed: true,
		arm: func(r *race) {
			r.f.loseGateData(0, "a")
			r.f.clock.Advance(59 * time.Second)
			confirmAt(r, stocktest.OnMethod("Levels"), nil, func() { r.f.clock.Advance(2 * time.Second) })
		},
		act: func(r *race) error { return r.f.m.Deduct(r.f.t.Context(), ord("o1", 3)) },
	}, {
		// A Confirm finds the gate closed the order (a Revert whose record
		// step failed) and returns the copy; the gate loses its data and a
		// second Confirm of the order, decided by the record, lands first.
		name:   "confirm of an order the gate closed",
		placed: true,
		arm: func(r *race) {
			revertFailed(r)
			confirmAt(r, reverting, func() { r.f.loseGateData(7, "a") }, nil)
		},
		act: func(r *race) error { return r.f.m.Confirm(r.f.t.Context(), "o1") },
	}, {
		// A redelivered Settle finds the gate closed the order and returns
		// the copy an earlier delivery wrote, as the gate loses its data
		// and a Confirm decided by the record lands first.
		name:   "redelivered settle of an order the gate closed",
		placed: true,
		arm: func(r *race) {
			revertFailed(r)
			confirmAt(r, reverting, func() { r.f.loseGateData(7, "a") }, nil)
		},
		act: func(r *race) error { return r.f.m.Settle(r.f.t.Context(), ord("o1", 3)) },
	}, {
		// Two Confirms of an order the gate lost, both decided by the
		// record: the second one's confirm lands inside the first one's,
		// just before the gate deadline, and the deadline passes before
		// the first one looks at the clock again. The first must not undo
		// the sale the second answered.
		name:   "confirm decided by the record while the deadline passes",
		placed: true,
		arm: func(r *race) {
			r.f.loseGateData(7, "a")
			r.f.clock.Advance(59 * time.Second)
			confirmAt(r, stocktest.OnMethod("Confirm"), nil, func() { r.f.clock.Advance(2 * time.Second) })
		},
		act: func(r *race) error { return r.f.m.Confirm(r.f.t.Context(), "o1") },
	}}
	for _, backend := range []string{"memstock", "sqlite"} {
		for _, c := range cases {
			t.Run(backend+"/"+c.name, func(t *testing.T) {
				r := &race{f: newFixtureOn(t, backend)}
				ctx := t.Context()
				if err := r.f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
				if c.placed {
					if err := r.f.m.Deduct(ctx, ord("o1", 3)); err != nil {
						t.Fatal(err)
					}
				}
				c.arm(r)
				err := c.act(r)
				r.f.record.SetBefore(nil)
				r.f.gate.SetBefore(nil)
				if !r.fired {
					t.Fatal("the race was never reached")
				}
				if r.confirmed != nil {
					t.Fatalf("the racing Confirm: %v, want nil (the record decides before the gate deadline)", r.confirmed)
				}
				if st := r.f.recordState("o1"); st != stock.StateConfirmed {
					t.Fatalf("the racing Confirm returned nil but the record's order is %v: a sale the buyer was told stands was undone", st)
				}
				if err != nil && stock.IsBusiness(err) {
					t.Fatalf("the flow's call: %v, a refusal for an order the record has sold", err)
				}
				r.f.want(r.f.record, "record", "a", 7, 0, 3)
				if len(r.f.drift) == 0 {
					t.Fatal("no drift reported: the gate does not hold the sale the record kept")
				}
			})
		}
	}
}
