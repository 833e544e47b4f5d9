package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A hold the reclaimer returned expired: a buyer who retries its Deduct
// after the gate forgot the order (a failover, a flush, Retention) is
// answered by the record, and gets stock.ErrHoldExpired, not
// stock.ErrOrderClosed for an order nobody reverted. So does the record
// read alone (the degraded path).
func TestRepeatOfAReclaimedHoldIsExpired(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, ord("o1", 1)); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	if got, err := f.m.ReclaimExpired(ctx, 10); err != nil || len(got) != 1 {
		t.Fatalf("ReclaimExpired: %v, %v; want the one line", got, err)
	}
	f.want(f.record, "record", "a", 3, 0, 0)
	if err := f.record.Deduct(ctx, ord("o1", 1)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("the record's answer to a repeat of the returned hold: %v, want ErrHoldExpired", err)
	}
	f.loseGateData(3, "a")
	if err := f.m.Deduct(ctx, ord("o1", 1)); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("repeat of a returned hold the gate forgot: %v, want ErrHoldExpired", err)
	}
	f.want(f.record, "record", "a", 3, 0, 0)
	f.want(f.gate, "gate", "a", 3, 0, 0)
}
