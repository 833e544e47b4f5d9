package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Confirm that finds the order not yet recorded (its hand-off queued)
// must not sell it when a Settle records it meanwhile and the gate
// deadline passes: the gate returned the units, so a nil answer would
// count them twice.
func TestConfirmOfAnOrderRecordedMeanwhileDoesNotSellAnExpiredHold(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(50 * time.Second) // in the queue
	// The Settle lands right after Confirm's first read of the record
	// (which finds the order not recorded), before whatever Confirm does
	// next at the record, and the gate deadline passes meanwhile.
	reads, fired := 0, false
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Orders" && reads == 0 {
			reads++
			return
		}
		if reads == 1 && !fired {
			fired = true
			if err := f.m.Settle(ctx, f.queue[0]); err != nil {
				t.Errorf("Settle: %v", err)
			}
			f.clock.Advance(11 * time.Second) // past the gate deadline
		}
	})
	err := f.m.Confirm(ctx, "o1")
	f.record.SetBefore(nil)
	if !fired && !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("Confirm of an order the record did not have: %v, want ErrUnknownOrder", err)
	}
	ga, _ := f.gate.Available(ctx, "a")
	ra, _ := f.record.Available(ctx, "a")
	t.Logf("Confirm=%v gate avail=%d record avail=%d record state=%v drift=%v", err, ga, ra, f.recordState("o1"), f.drift)
	if err == nil && ga > ra {
		t.Fatalf("Confirm answered nil for an order whose gate hold expired and was returned: gate available %d > record available %d", ga, ra)
	}
}

// A Confirm whose gate cannot be reached (dial refused) is answered with a
// *TierError "call again", and so is its retry while the gate is still
// unreachable: neither may answer nil while the gate still holds the
// order, whose reclaimer returns the units at its deadline.
func TestConfirmRetryTellsTheGateBeforeAnsweringNil(t *testing.T) {
	f := heldOrder(t)
	ctx := t.Context()
	f.gate.SetFault(stocktest.Down)
	err1 := f.m.Confirm(ctx, "o1")
	err2 := f.m.Confirm(ctx, "o1")
	f.gate.SetFault(stocktest.Healthy)
	t.Logf("first=%v retry=%v", err1, err2)
	f.clock.Advance(61 * time.Second)
	_, _ = f.m.ReclaimExpired(ctx, 10)
	ga, _ := f.gate.Available(ctx, "a")
	ra, _ := f.record.Available(ctx, "a")
	t.Logf("gate avail=%d record avail=%d record=%v drift=%v", ga, ra, f.recordState("o1"), f.drift)
	if err2 == nil && ga > ra {
		t.Fatalf("retry answered nil while the gate was never told: gate available %d > record available %d after reclaim", ga, ra)
	}
}

// A Confirm whose gate cannot be asked must not sell the order at the
// record: the gate still holds it, and when nobody calls again before its
// deadline its reclaimer returns the units. A sale at the record then
// leaves the gate with units the record has sold (the gate admits orders
// the record refuses, or sells them again after a reconcile that trusts
// it). The record confirms only what the gate confirmed or holds nothing
// of; the buyer is told to call again, and after the deadline is told the
// hold expired, at both tiers alike.
func TestConfirmWithTheGateUnreachableLeavesTheGateHoldDeciding(t *testing.T) {
	f := heldOrder(t)
	ctx := t.Context()
	f.gate.SetFault(stocktest.Down)
	err := f.m.Confirm(ctx, "o1")
	f.gate.SetFault(stocktest.Healthy)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm with the gate unreachable: %v, want an error to call again on", err)
	}
	if got := f.recordState("o1"); got != stock.StateHeld {
		t.Fatalf("record state after Confirm with the gate unreachable: %v, want held", got)
	}
	f.clock.Advance(61 * time.Second) // past the gate deadline, nobody called again
	if _, err := f.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	f.want(f.gate, "gate", "a", 10, 0, 0)
	f.want(f.record, "record", "a", 10, 0, 0)
	if err := f.m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("Confirm after the deadline: %v, want ErrHoldExpired", err)
	}
	if len(f.drift) != 0 {
		t.Fatalf("drift %+v, want none", f.drift)
	}
}

// heldOrder is a fixture with 10 units of "a" on sale (hold 1 min) and
// order "o1" of 3 held at both tiers.
func heldOrder(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, false)
	if err := f.m.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(t.Context(), ord("o1", 3)); err != nil {
		t.Fatal(err)
	}
	return f
}
