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

// A partial return the gate applied before the hold's deadline, whose
// record step comes after the tiered reclaimer returned the rest at the
// gate and the record's whole copy, was applied: every unit it asked back
// is back at both tiers, exactly once. Its answer is nil, not the
// record's refusal of a copy that ended since (which would tell the
// caller that nothing was given back, while the gate did give it back),
// and its retry is nil too.
func TestReview13ReturnRacingTheReclaimerIsApplied(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		clk := stocktest.NewClock(stocktest.Epoch)
		gate, record := stocktest.NewFaulty(memstock.New(clk)), stocktest.NewFaulty(memstock.New(clk))
		m := tiered.New(gate, record, tiered.Config{Clock: clk, RecordGrace: grace})
		ctx := t.Context()
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := m.Deduct(ctx, ord("o1", 4)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute - time.Second)
		fired := false
		record.SetBefore(func(c stocktest.Call) {
			if c.Method != "RevertItems" || fired {
				return
			}
			fired = true
			clk.Advance(time.Second) // the gate's deadline
			if got, err := m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 || got[0].Qty != 3 {
				t.Errorf("grace %v: reclaim = %v, %v", grace, got, err)
			}
		})
		r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
		if err := m.RevertItems(ctx, r); err != nil {
			t.Errorf("grace %v: RevertItems the gate applied = %v, want nil", grace, err)
		}
		if err := m.RevertItems(ctx, r); err != nil {
			t.Errorf("grace %v: its retry = %v, want nil", grace, err)
		}
		for _, tier := range []struct {
			name string
			m    stock.Manager
		}{{"gate", gate}, {"record", record}} {
			lv, err := tier.m.Levels(ctx, "a")
			if err != nil || lv.Available != 10 || lv.Held != 0 || lv.Sold != 0 {
				t.Errorf("grace %v: %s levels %+v, %v", grace, tier.name, lv, err)
			}
		}
	}
}

// An extension of an order whose Deduct stopped after the gate (the record
// down) is not told nil while the record does not have the order: the
// Deduct's retry records it with the SKU's hold time from then, and the
// record's reclaimer (and Confirm, which reads the record first) would end
// it before the deadline told. It is a *TierError; once the Deduct is
// finished its retry extends the record's copy, and a Confirm before the
// extended deadline sells the order at both tiers.
func TestReview13ExtendOfAHalfWayDeductIsNotToldNil(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		x := newExtFixture(t, grace)
		ctx := t.Context()
		if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		x.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Deduct"))
		if err := x.m.Deduct(ctx, ord("o1", 4)); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("grace %v: Deduct with the record down = %v", grace, err)
		}
		x.record.SetFault(stocktest.Healthy)
		start := x.clock.Now()
		to := start.Add(8 * time.Minute)
		var te *tiered.TierError
		if err := x.m.ExtendHold(ctx, "o1", to); !errors.As(err, &te) || te.Tier != tiered.Record || !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("grace %v: ExtendHold of the half-way order = %v, want a *TierError at the record", grace, err)
		}
		if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
			t.Fatalf("grace %v: Deduct's retry = %v", grace, err)
		}
		if err := x.m.ExtendHold(ctx, "o1", to); err != nil {
			t.Fatalf("grace %v: ExtendHold's retry = %v", grace, err)
		}
		setClock(x.clock, start.Add(5*time.Minute)) // past the record's deadline from the Deduct
		if _, err := x.m.ReclaimExpired(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if err := x.m.Confirm(ctx, "o1"); err != nil {
			t.Fatalf("grace %v: Confirm before the extended deadline: %v", grace, err)
		}
		x.want(x.gate, "gate", "a", 6, 0, 4)
		x.want(x.record, "record", "a", 6, 0, 4)
	}
}

// The same return whose record step comes after the record's own deadline
// (no reclaim ran between): the record refuses the copy as expired, which
// gives back everything at its reclaim. The return was applied at the
// gate in time: nil, and the next reclaim brings both tiers back to the
// units on sale, each unit once.
func TestReview13ReturnMeetingAnExpiredCopyIsApplied(t *testing.T) {
	for _, grace := range []time.Duration{0, 30 * time.Second} {
		clk := stocktest.NewClock(stocktest.Epoch)
		gate, record := stocktest.NewFaulty(memstock.New(clk)), stocktest.NewFaulty(memstock.New(clk))
		m := tiered.New(gate, record, tiered.Config{Clock: clk, RecordGrace: grace})
		ctx := t.Context()
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := m.Deduct(ctx, ord("o1", 4)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute - time.Second)
		record.SetBefore(func(c stocktest.Call) {
			if c.Method == "RevertItems" {
				clk.Advance(3 * time.Minute) // past the record's deadline
			}
		})
		r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
		if err := m.RevertItems(ctx, r); err != nil {
			t.Errorf("grace %v: RevertItems the gate applied = %v, want nil", grace, err)
		}
		record.SetBefore(nil)
		if _, err := m.ReclaimExpired(ctx, 10); err != nil {
			t.Fatal(err)
		}
		for _, tier := range []struct {
			name string
			m    stock.Manager
		}{{"gate", gate}, {"record", record}} {
			lv, err := tier.m.Levels(ctx, "a")
			if err != nil || lv.Available != 10 || lv.Held != 0 || lv.Sold != 0 {
				t.Errorf("grace %v: %s levels %+v, %v", grace, tier.name, lv, err)
			}
		}
	}
}
