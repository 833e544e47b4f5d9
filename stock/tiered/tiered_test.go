package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

func TestConformanceSync(t *testing.T) {
	stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
		return tiered.New(memstock.New(clock), memstock.New(clock), tiered.Config{Clock: clock})
	})
}

type fixture struct {
	t            *testing.T
	clock        *stocktest.Clock
	gate, record *stocktest.Faulty
	m            *tiered.Manager
	drift        []tiered.Drift
	queue        []stock.Order
}

func newFixture(t *testing.T, async bool) *fixture {
	f := &fixture{t: t, clock: stocktest.NewClock(stocktest.Epoch)}
	f.gate = stocktest.NewFaulty(memstock.New(f.clock))
	f.record = stocktest.NewFaulty(memstock.New(f.clock))
	cfg := tiered.Config{Clock: f.clock, OnDrift: func(d tiered.Drift) { f.drift = append(f.drift, d) }}
	if async {
		cfg.Recorder = tiered.RecorderFunc(func(_ context.Context, o stock.Order) error {
			f.queue = append(f.queue, o)
			return nil
		})
	}
	f.m = tiered.New(f.gate, f.record, cfg)
	return f
}

// beforeRecordDeduct makes fn run, with the order ID, at the start of
// every later Deduct that reaches the record.
func (f *fixture) beforeRecordDeduct(fn func(orderID string)) {
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" {
			fn(c.OrderID)
		}
	})
}

// sale puts sku on sale at each tier with its own units.
func (f *fixture) sale(sku string, gateUnits, recordUnits int64, gateHold, recordHold time.Duration) {
	f.t.Helper()
	ctx := f.t.Context()
	if err := f.gate.PutOnSale(ctx, stock.Listing{SKU: sku, Units: gateUnits, HoldTTL: gateHold}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.record.PutOnSale(ctx, stock.Listing{SKU: sku, Units: recordUnits, HoldTTL: recordHold}); err != nil {
		f.t.Fatal(err)
	}
}

// want checks available/held/sold at one tier.
func (f *fixture) want(tier stock.Manager, name, sku string, avail, held, sold int64) {
	f.t.Helper()
	if ft, ok := tier.(*stocktest.Faulty); ok {
		tier = ft.Manager // read the store itself, past any injected fault
	}
	lv, err := tier.Levels(f.t.Context(), sku)
	if err != nil {
		f.t.Fatal(err)
	}
	if lv.Available != avail || lv.Held != held || lv.Sold != sold {
		f.t.Fatalf("%s %s: available/held/sold = %d/%d/%d, want %d/%d/%d",
			name, sku, lv.Available, lv.Held, lv.Sold, avail, held, sold)
	}
}

func ord(id string, qty int64) stock.Order {
	return stock.Order{ID: id, UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: qty}}}
}

func TestRecordRefusalRevertsGateHold(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 2, 0, 0) // the record knows better: only 2 left
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	err := f.m.Deduct(ctx, ord("o2", 1))
	if !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Deduct refused by the record: %v, want ErrSoldOut", err)
	}
	f.want(f.gate, "gate", "a", 8, 2, 0)
	f.want(f.record, "record", "a", 0, 2, 0)
	if err := f.m.Revert(ctx, "o2"); !errors.Is(err, stock.ErrOrderClosed) && err != nil {
		t.Fatalf("Revert of refused order: %v", err)
	}
}

func TestRecordOutageLeavesGateHoldForRetry(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	f.record.SetFault(stocktest.Down)
	err := f.m.Deduct(ctx, ord("o1", 3))
	var te *tiered.TierError
	if !errors.As(err, &te) || te.Tier != tiered.Record || !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Deduct with the record down: %v, want a *TierError at the record", err)
	}
	f.want(f.gate, "gate", "a", 7, 3, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
	f.record.SetFault(stocktest.Healthy)
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	f.want(f.gate, "gate", "a", 7, 3, 0)
	f.want(f.record, "record", "a", 7, 3, 0)
}

func TestLostRecordReplyTakesOnce(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	f.record.SetFault(stocktest.LostReply)
	if err := f.m.Deduct(ctx, ord("o1", 3)); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Deduct with a lost reply: %v", err)
	}
	f.record.SetFault(stocktest.Healthy)
	for range 2 {
		if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
			t.Fatalf("retry: %v", err)
		}
	}
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	f.want(f.gate, "gate", "a", 7, 0, 3)
	f.want(f.record, "record", "a", 7, 0, 3)
}

func TestAsyncFlow(t *testing.T) {
	f := newFixture(t, true)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	p, err := f.m.Place(ctx, ord("o1", 2))
	if err != nil || p != tiered.Pending {
		t.Fatalf("Place = %v, %v; want pending", p, err)
	}
	f.want(f.gate, "gate", "a", 8, 2, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("Confirm of a pending order: %v, want ErrUnknownOrder", err)
	}
	f.want(f.gate, "gate", "a", 8, 2, 0)
	for range 2 { // the queue delivers at least once
		if err := f.m.Settle(ctx, f.queue[0]); err != nil {
			t.Fatalf("Settle: %v", err)
		}
	}
	f.want(f.record, "record", "a", 8, 2, 0)
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	f.want(f.gate, "gate", "a", 8, 0, 2)
	f.want(f.record, "record", "a", 8, 0, 2)
}

func TestAsyncRevertBeforeSettleRecordsNothing(t *testing.T) {
	f := newFixture(t, true)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert of a pending order: %v", err)
	}
	if err := f.m.Settle(ctx, f.queue[0]); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Settle after Revert: %v, want ErrOrderClosed", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
}

func TestAsyncExpiredBeforeSettleRecordsNothing(t *testing.T) {
	f := newFixture(t, true)
	f.sale("a", 10, 10, time.Minute, time.Minute)
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Hour)
	if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("ReclaimExpired = %v, %v; want the one gate hold", got, err)
	}
	if err := f.m.Settle(ctx, f.queue[0]); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Settle after expiry: %v, want ErrHoldExpired", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
}

// A Revert that closes the gate while the record is being written: the
// recheck finds the order closed and reverts the record.
func TestRevertRacingSettleLeavesNothingRecorded(t *testing.T) {
	f := newFixture(t, true)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	f.beforeRecordDeduct(func(id string) {
		f.record.SetBefore(nil)
		if err := f.m.Revert(ctx, id); err != nil {
			t.Errorf("racing Revert: %v", err)
		}
	})
	if err := f.m.Settle(ctx, f.queue[0]); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Settle racing a Revert: %v, want ErrOrderClosed", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm after the race: %v, want ErrOrderClosed", err)
	}
}

func TestConfirmGateDeadlineDecides(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, time.Minute, time.Hour) // the gate's hold runs out first
	ctx := t.Context()
	if err := f.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm recorded but expired at the gate: %v, want ErrHoldExpired", err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	f.want(f.gate, "gate", "a", 10, 0, 0)

	// A gate that never saw the order (a fallback took it at the record
	// while the gate was down) does not undo the sale; it is drift.
	if err := f.record.Deduct(ctx, ord("o3", 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Confirm(ctx, "o3"); err != nil {
		t.Fatalf("Confirm of an order the gate never saw: %v", err)
	}
	f.want(f.record, "record", "a", 9, 0, 1)
	if len(f.drift) != 1 || f.drift[0].Tier != tiered.Gate || !errors.Is(f.drift[0].Err, stock.ErrUnknownOrder) {
		t.Fatalf("drift reports %+v, want one gate ErrUnknownOrder", f.drift)
	}

	// The record's expiry wins the other way round too.
	f.sale("b", 10, 10, time.Hour, time.Minute)
	o := stock.Order{ID: "o2", Items: []stock.Item{{SKU: "b", Qty: 3}}}
	if err := f.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if err := f.m.Confirm(ctx, "o2"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm expired at the record: %v, want ErrHoldExpired", err)
	}
	f.want(f.record, "record", "b", 10, 0, 0)
	f.want(f.gate, "gate", "b", 10, 0, 0)
}

func TestConfirmAndRevertRetryAfterGateFailure(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	for _, id := range []string{"o1", "o2"} {
		if err := f.m.Deduct(ctx, ord(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	f.gate.SetFault(stocktest.Down)
	var te *tiered.TierError
	if err := f.m.Confirm(ctx, "o1"); !errors.As(err, &te) || te.Tier != tiered.Gate {
		t.Fatalf("Confirm with the gate down: %v", err)
	}
	if err := f.m.Revert(ctx, "o2"); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Revert with the gate down: %v", err)
	}
	f.want(f.record, "record", "a", 8, 2, 0) // the gate still holds both: nothing decided at the record
	f.gate.SetFault(stocktest.Healthy)
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Revert(ctx, "o2"); err != nil {
		t.Fatal(err)
	}
	f.want(f.gate, "gate", "a", 9, 0, 1)
	f.want(f.record, "record", "a", 9, 0, 1)
	if len(f.drift) != 0 {
		t.Fatalf("unexpected drift %+v", f.drift)
	}
}

func TestRevertReachesGateOnlyOrders(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 10, 10, 0, 0)
	ctx := t.Context()
	f.record.SetFault(stocktest.Down)
	_ = f.m.Deduct(ctx, ord("o1", 4))
	f.record.SetFault(stocktest.Healthy)
	if err := f.m.Revert(ctx, "o1"); err != nil {
		t.Fatalf("Revert of a gate-only hold: %v", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	if err := f.m.Revert(ctx, "ghost"); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("Revert of unknown order: %v", err)
	}
}

func TestReclaimBothTiers(t *testing.T) {
	f := newFixture(t, false)
	f.sale("a", 100, 100, time.Minute, time.Minute)
	ctx := t.Context()
	for i := range 30 {
		if err := f.m.Deduct(ctx, ord(fmt.Sprint("o", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Hour)
	n := 0
	for {
		got, err := f.m.ReclaimExpired(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		n += len(got)
		if len(got) < 4 {
			break
		}
	}
	if n != 30 {
		t.Fatalf("reported %d lines, want 30", n)
	}
	f.want(f.gate, "gate", "a", 100, 0, 0)
	f.want(f.record, "record", "a", 100, 0, 0)
}

func TestReclaimRecordFailureIsReported(t *testing.T) {
	f := newFixture(t, false)
	f.record.SetFault(stocktest.Down)
	var te *tiered.TierError
	if _, err := f.m.ReclaimExpired(t.Context(), 4); !errors.As(err, &te) || te.Tier != tiered.Record {
		t.Fatalf("ReclaimExpired with the record down: %v", err)
	}
}
