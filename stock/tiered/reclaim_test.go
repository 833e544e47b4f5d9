package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

func TestPutOnSaleGivesTheRecordTheLongerHold(t *testing.T) {
	for _, c := range []struct {
		grace, hold, want time.Duration
	}{
		{0, time.Minute, 2 * time.Minute},
		{0, 0, 2 * stock.DefaultHoldTTL},
		{10 * time.Second, time.Minute, 70 * time.Second},
		{0, stock.MaxHoldTTL, stock.MaxHoldTTL},
	} {
		f := newFixture(t, false)
		m := tiered.New(f.gate, f.record, tiered.Config{RecordGrace: c.grace})
		if err := m.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 5, HoldTTL: c.hold}); err != nil {
			t.Fatal(err)
		}
		g, _ := f.gate.Levels(t.Context(), "a")
		r, _ := f.record.Levels(t.Context(), "a")
		wantGate := c.hold
		if wantGate == 0 {
			wantGate = stock.DefaultHoldTTL
		}
		if g.HoldTTL != wantGate || r.HoldTTL != c.want {
			t.Errorf("grace %v, hold %v: gate/record hold %v/%v, want %v/%v", c.grace, c.hold, g.HoldTTL, r.HoldTTL, wantGate, c.want)
		}
	}
}

// One failed revert at the record, after the gate returned the hold, is
// retried by the next pass (on any node): the gate says the hold expired,
// so the record's copy is returned and the unit the gate sells again is
// recorded, long before the record's own deadline.
func TestReclaimRetriesAFailedRecordRevert(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second) // past the gate's deadline, not the record's (2m)
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
	got, err := f.m.ReclaimExpired(ctx, 10)
	var te *tiered.TierError
	if len(got) != 1 || !errors.As(err, &te) || te.Tier != tiered.Record {
		t.Fatalf("ReclaimExpired with the record's revert failing = %v, %v; want the gate's line and a record *TierError", got, err)
	}
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("ReclaimExpired error %v does not match ErrUnknownOutcome", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 6, 4, 0)

	// The next pass: nothing due at the gate; the record's copy is listed,
	// the gate says its hold expired, the copy is returned.
	if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("second pass = %v, %v", got, err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Deduct(ctx, ord("o2", 8)); err != nil {
		t.Fatalf("Deduct of the units the gate sells again: %v", err)
	}
	f.want(f.gate, "gate", "a", 2, 8, 0)
	f.want(f.record, "record", "a", 2, 8, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm of the returned order: %v, want ErrHoldExpired", err)
	}
}

// A node stops between the gate's reclaim and the record's revert, and
// the gate cannot be asked about the record's copy either: the copy stays
// until the record's own, later deadline, and no unit is oversold
// meanwhile (the gate resells, the record refuses, the gate hold is
// reverted).
func TestReclaimCrashBeforeRecordRevertIsBackstopped(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second) // past the gate's deadline, not the record's (2m)
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
	got, err := f.m.ReclaimExpired(ctx, 10)
	var te *tiered.TierError
	if len(got) != 1 || !errors.As(err, &te) || te.Tier != tiered.Record {
		t.Fatalf("ReclaimExpired with the record's revert failing = %v, %v; want the gate's line and a record *TierError", got, err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 6, 4, 0)

	// Another node's pass while the gate cannot answer about orders:
	// nothing due at the gate, the record's copy is not due yet either.
	f.gate.SetFaultFor(stocktest.Down, stocktest.OnMethod("Orders"))
	if got, err := f.m.ReclaimExpired(ctx, 10); !errors.As(err, &te) || te.Tier != tiered.Gate || len(got) != 0 {
		t.Fatalf("second pass = %v, %v; want no lines and a gate *TierError", got, err)
	}
	f.want(f.record, "record", "a", 6, 4, 0)
	// The gate resells the units; the record still holds them and refuses.
	if err := f.m.Deduct(ctx, ord("o2", 8)); !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Deduct of units the record still holds: %v, want ErrSoldOut", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)

	f.clock.Advance(time.Minute) // past the record's deadline
	if got, err := f.m.ReclaimExpired(ctx, 10); len(got) != 0 || !errors.As(err, &te) || te.Tier != tiered.Gate {
		t.Fatalf("backstop pass = %v, %v; want no gate lines", got, err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	f.gate.SetFault(stocktest.Healthy)
	if err := f.m.Deduct(ctx, ord("o3", 8)); err != nil {
		t.Fatalf("Deduct after the backstop: %v", err)
	}
}

// The gate's reclaimer returns a hold while the hand-off is writing the
// record: its revert at the record finds nothing yet, the record then takes
// the order, and Settle's recheck returns that copy.
func TestSettleRacingReclaimReturnsRecordCopy(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.beforeRecordDeduct(func(string) {
		f.record.SetBefore(nil)
		f.clock.Advance(2 * time.Minute)
		if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
			t.Errorf("racing ReclaimExpired = %v, %v", got, err)
		}
	})
	// The hold expired while the record was written: Settle says so (the
	// record does not have the order), and a payment is refused.
	if err := f.m.Settle(ctx, f.queue[0]); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Settle racing the reclaimer: %v, want ErrHoldExpired", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm after the race: %v, want ErrHoldExpired", err)
	}
}

// A consumer wrote the record and stopped before its recheck, after the
// gate had already returned the hold: the redelivered message returns the
// record's copy.
func TestRedeliveredSettleReturnsRecordCopy(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("ReclaimExpired = %v, %v", got, err)
	}
	if err := f.record.Deduct(ctx, f.queue[0]); err != nil { // the first delivery's write
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
	var te *tiered.TierError
	if err := f.m.Settle(ctx, f.queue[0]); !errors.As(err, &te) || te.Tier != tiered.Record {
		t.Fatalf("redelivery with the record's revert failing: %v, want a record *TierError (deliver again)", err)
	}
	f.record.SetFault(stocktest.Healthy)
	if err := f.m.Settle(ctx, f.queue[0]); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("redelivery: %v, want ErrHoldExpired", err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
}

// A Confirm that reached the record but not the gate (a fallback answered
// it while the gate was down) is a sale: the gate's reclaimer does not
// refund it, and the units the gate returned are reported as drift.
func TestReclaimKeepsSaleConfirmedAtRecord(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"o1", "o2"} {
		if err := f.m.Deduct(ctx, ord(id, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.record.Confirm(ctx, "o1"); err != nil { // the degraded Confirm
		t.Fatal(err)
	}
	f.clock.Advance(90 * time.Second)
	got, err := f.m.ReclaimExpired(ctx, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("ReclaimExpired = %v, %v; want both gate holds", got, err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 8, 0, 2)
	if len(f.drift) != 1 || f.drift[0].OrderID != "o1" || f.drift[0].Tier != tiered.Record ||
		len(f.drift[0].SKUs) != 1 || f.drift[0].SKUs[0] != "a" {
		t.Fatalf("drift %+v, want one report for o1 at the record", f.drift)
	}
}

// While the gate is down, holds taken at the record alone (by a fallback)
// still expire: the record is swept even though the gate's reclaim fails.
func TestReclaimSweepsRecordWhileGateDown(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.record.Deduct(ctx, ord("o1", 5)); err != nil {
		t.Fatal(err)
	}
	f.gate.SetFault(stocktest.Down)
	f.clock.Advance(3 * time.Minute)
	var te *tiered.TierError
	if _, err := f.m.ReclaimExpired(ctx, 10); !errors.As(err, &te) || te.Tier != tiered.Gate {
		t.Fatalf("ReclaimExpired with the gate down: %v, want a gate *TierError", err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
}

// The gate returned a hold and sold the unit again before the reclaimer
// reverted the record's copy: the record's refusal is asked again once, and
// the unit is there by then.
func TestSettleAsksTheRecordAgainBeforeARefusalStands(t *testing.T) {
	for _, c := range []struct {
		recheck time.Duration
		want    error
	}{{time.Millisecond, nil}, {-1, stock.ErrSoldOut}} {
		f := newFixture(t, false)
		ctx := t.Context()
		m := tiered.New(f.gate, f.record, tiered.Config{RecheckAfter: c.recheck, Clock: f.clock})
		f.sale("a", 1, 1, time.Minute, time.Minute)
		if err := m.Deduct(ctx, ord("o1", 1)); err != nil {
			t.Fatal(err)
		}
		if err := f.gate.Revert(ctx, "o1"); err != nil { // the gate's half of a reclaim
			t.Fatal(err)
		}
		calls := 0
		f.beforeRecordDeduct(func(string) {
			if calls++; calls == 2 { // the second ask: the reclaimer's revert has landed
				if err := f.record.Revert(ctx, "o1"); err != nil {
					t.Error(err)
				}
			}
		})
		if err := m.Deduct(ctx, ord("o2", 1)); !errors.Is(err, c.want) {
			t.Fatalf("RecheckAfter %v: Deduct of the resold unit = %v, want %v", c.recheck, err, c.want)
		}
	}
}
