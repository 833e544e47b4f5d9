package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// wantExpired fails unless every later look at o1 says its hold expired,
// as a backend answers an order whose hold expired: Confirm and a repeat
// Deduct answer stock.ErrHoldExpired and Orders reads expired.
func wantExpired(t *testing.T, m *tiered.Manager, when string) {
	t.Helper()
	ctx := t.Context()
	if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("Confirm %s: %v, want %v (as answered before)", when, err, stock.ErrHoldExpired)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Errorf("repeat Deduct %s: %v, want %v", when, err, stock.ErrHoldExpired)
	}
	in, err := m.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if in[0].State != stock.StateExpired {
		t.Errorf("Orders %s: %s, want expired", when, in[0].State)
	}
}

// An answer once given does not change: a Confirm refused with
// stock.ErrHoldExpired stays refused so, by Confirm, by a repeat Deduct
// and in Orders, with the gate intact and once it lost its data. The
// record's copy ends before the gate's hold: a gate that lost the order
// (a flush, then a rebuild) took a repeat of it afresh, and the record's
// copy, answered as the repeat, passes its own deadline while the gate's
// fresh hold still runs. A Confirm that confirmed at the gate and undid
// that with a refund left the gate saying the order was refunded, and the
// next Confirm answered stock.ErrOrderClosed.
func TestConfirmExpiredAnswerAfterAFreshGateHoldStaysFinal(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := stocktest.NewFaulty(memstock.New(clock)), memstock.New(clock)
	m := tiered.New(gate, record, tiered.Config{Clock: clock, RecordGrace: 10 * time.Second})
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	rebuild := func(units int64) {
		g := memstock.New(clock)
		if err := g.PutOnSale(context.Background(), stock.Listing{SKU: "a", Units: units, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		gate.Manager = g
	}
	rebuild(7)
	clock.Advance(30 * time.Second)
	if err := m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatalf("repeat Deduct before the deadline: %v", err)
	}
	clock.Advance(45 * time.Second) // past the record copy's deadline, before the gate's
	if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm past the record copy's deadline: %v, want %v", err, stock.ErrHoldExpired)
	}
	wantExpired(t, m, "with the gate intact")
	lv, err := gate.Manager.Levels(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if lv.Held != 0 || lv.Sold != 0 || lv.Available != 7 {
		t.Errorf("gate: available/held/sold = %d/%d/%d, want 7/0/0", lv.Available, lv.Held, lv.Sold)
	}
	rebuild(10)
	wantExpired(t, m, "once the gate lost its data")
	if lv, err := record.Levels(ctx, "a"); err != nil || lv.Available != 10 || lv.Held != 0 || lv.Sold != 0 {
		t.Errorf("record: %+v, %v; want 10 available, nothing held or sold", lv, err)
	}
}

// The same with the record's copy ended by its own reclaimer while the
// gate's extended hold runs (the extension did not reach the record):
// Confirm answers stock.ErrHoldExpired, as Orders reads it, and keeps that
// answer.
func TestConfirmExpiredAnswerAfterAnExtensionTheRecordMissedStaysFinal(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("ExtendHold"))
	if err := f.m.ExtendHold(ctx, "o1", f.clock.Now().Add(4*time.Minute)); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("ExtendHold with the record down: %v, want a *TierError", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.clock.Advance(3*time.Minute + 30*time.Second) // past the record's deadline, before the gate's
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm: %v, want %v", err, stock.ErrHoldExpired)
	}
	wantExpired(t, f.m, "after the first Confirm")
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
}
