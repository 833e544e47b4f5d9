package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Confirm that stopped between the gate (confirmed) and the record (still
// held) is finished by the reclaimer's follow-up once the gate deadline has
// passed: the buyer paid, so the record's copy is confirmed, never left
// held past the deadline nor returned.
func TestFollowUpFinishesAConfirmThatStoppedHalfway(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm with the record's step failing: %v, want ErrUnknownOutcome", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.want(f.gate, "gate", "a", 6, 0, 4)
	f.want(f.record, "record", "a", 6, 4, 0)
	f.clock.Advance(90 * time.Second) // past the gate's deadline, not the record's (2m)
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatalf("ReclaimExpired: %v", err)
	}
	f.want(f.gate, "gate", "a", 6, 0, 4)
	f.want(f.record, "record", "a", 6, 0, 4)
	if err := f.m.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm again: %v", err)
	}
}

// The same half-way Confirm, found by the follow-up only after the record's
// own deadline too (the reclaimer ran less often than the RecordGrace): the
// record refuses to confirm a copy past its deadline and returns it, so the
// order is no sale at the truth and the gate's confirm is undone there as
// well. Left confirmed at the gate, the sale would be counted sold by the
// gate alone: a reconcile pass brings the gate's available up to the
// record's, and a later Revert (a refund at the gate) then gives the same
// units back a second time, above what the record can take.
func TestFollowUpUndoesTheGateConfirmWhenTheRecordCopyExpired(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	f.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm with the record's step failing: %v, want ErrUnknownOutcome", err)
	}
	f.record.SetFault(stocktest.Healthy)
	f.clock.Advance(150 * time.Second) // past the gate's deadline (1m) and the record's (2m)
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatalf("ReclaimExpired: %v", err)
	}
	f.want(f.record, "record", "a", 10, 0, 0)
	f.want(f.gate, "gate", "a", 10, 0, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) && !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("Confirm after the follow-up: %v, want the order's end (ErrHoldExpired or ErrOrderClosed)", err)
	}
	_ = f.m.Revert(ctx, "o1")
	f.want(f.record, "record", "a", 10, 0, 0)
	f.want(f.gate, "gate", "a", 10, 0, 0)
}
