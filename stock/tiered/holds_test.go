package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// PutOnSale gives the record a MaxHoldTTL longer by the same grace as its
// hold time, capped at stock.MaxHoldTTL; a listing without one leaves the
// record's at its default (its hold time).
func TestPutOnSaleGivesTheRecordTheLongerMaxHold(t *testing.T) {
	for _, c := range []struct {
		grace, hold, max, wantGate, wantRecord time.Duration
	}{
		{0, time.Minute, 10 * time.Minute, 10 * time.Minute, 11 * time.Minute},
		{30 * time.Second, time.Minute, 10 * time.Minute, 10 * time.Minute, 10*time.Minute + 30*time.Second},
		{0, time.Minute, 0, time.Minute, 2 * time.Minute},
		{0, time.Hour, stock.MaxHoldTTL, stock.MaxHoldTTL, stock.MaxHoldTTL},
	} {
		x := newExtFixture(t, c.grace)
		if err := x.m.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 5, HoldTTL: c.hold, MaxHoldTTL: c.max}); err != nil {
			t.Fatal(err)
		}
		g, _ := x.gate.Levels(t.Context(), "a")
		r, _ := x.record.Levels(t.Context(), "a")
		if g.MaxHoldTTL != c.wantGate || r.MaxHoldTTL != c.wantRecord {
			t.Errorf("%+v: gate/record max %v/%v", c, g.MaxHoldTTL, r.MaxHoldTTL)
		}
	}
}

// An order's own hold time sets the gate's deadline, and the record's is
// the grace later (RecordGrace, or with zero the SKU's gate hold time), so
// the tiered reclaimer returns it at both tiers at the gate's deadline,
// shorter or longer than the SKU's hold time.
func TestOrderHoldTTLAtBothTiers(t *testing.T) {
	for _, c := range []struct {
		grace, own, wantGrace time.Duration
	}{
		{0, 5 * time.Minute, time.Minute},
		{0, 20 * time.Second, time.Minute},
		{30 * time.Second, 5 * time.Minute, 30 * time.Second},
		{30 * time.Second, 20 * time.Second, 30 * time.Second},
	} {
		x := newExtFixture(t, c.grace)
		ctx := t.Context()
		if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		o := ord("o1", 4)
		o.HoldTTL = c.own
		if err := x.m.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
		start := x.clock.Now()
		if g, r := x.order(x.gate, "o1").Deadline, x.order(x.record, "o1").Deadline; !g.Equal(start.Add(c.own)) || !r.Equal(start.Add(c.own+c.wantGrace)) {
			t.Fatalf("%+v: gate/record deadline +%v/+%v", c, g.Sub(start), r.Sub(start))
		}
		got, err := x.m.Orders(ctx, []string{"o1"})
		if err != nil || !got[0].Deadline.Equal(start.Add(c.own)) {
			t.Fatalf("%+v: Orders = %+v, %v", c, got, err)
		}
		setClock(x.clock, start.Add(c.own-time.Millisecond))
		if got, err := x.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("%+v: reclaim before the deadline = %v, %v", c, got, err)
		}
		x.want(x.record, "record", "a", 6, 4, 0)
		setClock(x.clock, start.Add(c.own))
		if got, err := x.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 || got[0].Qty != 4 {
			t.Fatalf("%+v: reclaim at the deadline = %v, %v", c, got, err)
		}
		x.want(x.gate, "gate", "a", 10, 0, 0)
		x.want(x.record, "record", "a", 10, 0, 0)

		// Past the SKU's maximum: refused at the gate, nothing written.
		o = ord("o2", 1)
		o.HoldTTL = 10*time.Minute + time.Millisecond
		var se *stock.SKUError
		if err := x.m.Deduct(ctx, o); !errors.Is(err, stock.ErrHoldTooLong) || !errors.As(err, &se) || se.SKU != "a" {
			t.Fatalf("%+v: Deduct past the max = %v", c, err)
		}
		x.want(x.gate, "gate", "a", 10, 0, 0)
		x.want(x.record, "record", "a", 10, 0, 0)
	}
}

// The record's copy of an order with its own hold time is kept by the
// follow-up of a gate that does not know the order to the order's gate
// deadline, not to the SKU's.
func TestOrderHoldTTLCopyTheGateLostKeepsItsDeadline(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := ord("o1", 4)
	o.HoldTTL = 5 * time.Minute
	if err := x.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	lost := newExt(memstock.New(x.clock)) // a gate rebuilt without the order
	if err := lost.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 6, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	m := tiered.New(lost, x.xrecord, tiered.Config{Clock: x.clock})
	x.clock.Advance(3 * time.Minute) // past the SKU's gate and record hold times
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	x.want(x.record, "record", "a", 6, 4, 0)
	x.clock.Advance(2 * time.Minute)
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	x.want(x.record, "record", "a", 10, 0, 0)
}

// An extended hold survives the tiered reclaimer: the record's copy is
// extended to the new gate deadline plus the grace, so neither the gate,
// nor the follow-up, nor the record's own reclaimer returns it at the old
// deadlines; at the new one both tiers return it.
func TestExtendedHoldSurvivesTheReclaimer(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		x := newExtFixture(t, grace)
		ctx := t.Context()
		if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
			t.Fatal(err)
		}
		start := x.clock.Now()
		g := grace
		if g == 0 {
			g = time.Minute
		}
		to := start.Add(5 * time.Minute)
		for range 2 { // idempotent
			if err := x.m.ExtendHold(ctx, "o1", to); err != nil {
				t.Fatal(err)
			}
		}
		if r := x.order(x.record, "o1").Deadline; !r.Equal(to.Add(g)) {
			t.Fatalf("grace %v: record deadline +%v, want +%v", grace, r.Sub(start), to.Add(g).Sub(start))
		}
		got, err := x.m.Orders(ctx, []string{"o1"})
		if err != nil || !got[0].Deadline.Equal(to) {
			t.Fatalf("grace %v: Orders = %+v, %v", grace, got, err)
		}
		setClock(x.clock, start.Add(3*time.Minute)) // past both old deadlines
		if got, err := x.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("grace %v: reclaim past the old deadlines = %v, %v", grace, got, err)
		}
		x.want(x.gate, "gate", "a", 6, 4, 0)
		x.want(x.record, "record", "a", 6, 4, 0)
		setClock(x.clock, to)
		if got, err := x.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
			t.Fatalf("grace %v: reclaim at the new deadline = %v, %v", grace, got, err)
		}
		x.want(x.gate, "gate", "a", 10, 0, 0)
		x.want(x.record, "record", "a", 10, 0, 0)
		if err := x.m.ExtendHold(ctx, "o1", to.Add(time.Minute)); !errors.Is(err, stock.ErrHoldExpired) {
			t.Fatalf("grace %v: ExtendHold after the reclaim = %v", grace, err)
		}
	}
}

// A gate that lost the order (rebuilt from the record) keeps an extended
// deadline: the follow-up reads it back from the record's.
func TestExtendedHoldSurvivesAGateThatLostTheOrder(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	start := x.clock.Now()
	if err := x.m.ExtendHold(ctx, "o1", start.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	lost := newExt(memstock.New(x.clock))
	if err := lost.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 6, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	m := tiered.New(lost, x.xrecord, tiered.Config{Clock: x.clock})
	setClock(x.clock, start.Add(3*time.Minute))
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	x.want(x.record, "record", "a", 6, 4, 0)
	// Extended further through the rebuilt gate: by the record alone.
	if err := m.ExtendHold(ctx, "o1", start.Add(7*time.Minute)); err != nil {
		t.Fatal(err)
	}
	setClock(x.clock, start.Add(6*time.Minute))
	if _, err := m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	x.want(x.record, "record", "a", 6, 4, 0)
	if err := m.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm before the extended deadline: %v", err)
	}
	x.want(x.record, "record", "a", 6, 0, 4)
}

// The gate's refusals are the answer, with nothing written at the record;
// a record that fails after the gate extended is a *TierError, and the
// retry extends the record.
func TestExtendHoldRefusalsAndRetry(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	start := x.clock.Now()
	if err := x.m.ExtendHold(ctx, "o1", start.Add(10*time.Minute+time.Millisecond)); !errors.Is(err, stock.ErrHoldTooLong) {
		t.Fatalf("ExtendHold past the bound = %v", err)
	}
	if err := x.m.ExtendHold(ctx, "nope", start.Add(time.Minute)); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("ExtendHold of an unknown order = %v", err)
	}
	if n := x.xrecord.count("ExtendHold"); n != 0 {
		t.Fatalf("record ExtendHold calls = %d, want 0", n)
	}
	x.xrecord.set("ExtendHold", stocktest.Down)
	err := x.m.ExtendHold(ctx, "o1", start.Add(10*time.Minute))
	var te *tiered.TierError
	if !errors.As(err, &te) || te.Tier != tiered.Record || !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("ExtendHold with the record down = %v", err)
	}
	x.xrecord.set("ExtendHold", stocktest.Healthy)
	if err := x.m.ExtendHold(ctx, "o1", start.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r := x.order(x.record, "o1").Deadline; !r.Equal(start.Add(11 * time.Minute)) {
		t.Fatalf("record deadline +%v, want +11m", r.Sub(start))
	}
	if err := x.m.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := x.m.ExtendHold(ctx, "o1", start.Add(10*time.Minute)); !errors.Is(err, stock.ErrOrderConfirmed) {
		t.Fatalf("ExtendHold of a confirmed order = %v", err)
	}
}

// At the cap (a maximum near stock.MaxHoldTTL) the record cannot hold the
// grace past the gate's extended deadline: it is extended to the gate's.
func TestExtendHoldAtTheCap(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour, MaxHoldTTL: stock.MaxHoldTTL}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	to := x.clock.Now().Add(stock.MaxHoldTTL)
	if err := x.m.ExtendHold(ctx, "o1", to); err != nil {
		t.Fatal(err)
	}
	if g, r := x.order(x.gate, "o1").Deadline, x.order(x.record, "o1").Deadline; !g.Equal(to) || !r.Equal(to) {
		t.Fatalf("gate/record deadline %v/%v, want %v", g, r, to)
	}
}

// setClock moves c forward to t.
func setClock(c *stocktest.Clock, t time.Time) { c.Advance(t.Sub(c.Now())) }

// A repeat of an order whose record copy passed its deadline there, taken
// again as new by a gate that lost it, returns the record's copy at once
// (not at the record's reclaimer), before the gate's hold: the gate never
// sells again units the record still holds.
func TestRepeatPastTheRecordDeadlineReturnsTheCopy(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	lost := newExt(memstock.New(x.clock)) // rebuilt: the record's hold counted taken
	if err := lost.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 7, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	m := tiered.New(lost, x.xrecord, tiered.Config{Clock: x.clock})
	x.clock.Advance(2 * time.Minute) // the record's own deadline, no reclaim run
	if err := m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("repeat past the record's deadline = %v, want ErrHoldExpired", err)
	}
	x.want(x.record, "record", "a", 10, 0, 0)
	x.want(lost.Faulty, "gate", "a", 7, 0, 0)
}
