package tiered_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// ReclaimExpired with a gate that answers stock.ErrUnavailable (nothing
// applied) and a record whose sweep returned a copy but lost its reply
// (stock.ErrUnknownOutcome): the record was written, so by package stock's
// rule the error matches ErrUnknownOutcome and never ErrUnavailable with
// it, though the sweep reported nothing.
func TestReclaimGateUnavailableRecordLostReplyIsUnknownOutcome(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(3 * time.Minute) // past the record's deadline too
	f.gate.SetFaultFor(stocktest.Unavailable, stocktest.OnMethod("ReclaimExpired"))
	// The record's sweep returns the copy, then its reply is lost: the
	// hook runs the sweep, and the faulted call (LostReply) finds nothing
	// more and fails with an unknown outcome.
	swept := false
	f.record.SetBefore(func(c stocktest.Call) {
		if c.Method == "ReclaimExpired" && !swept {
			swept = true
			if _, err := f.record.Manager.(stock.Reclaimer).ReclaimExpired(ctx, 10); err != nil {
				t.Error(err)
			}
		}
	})
	f.record.SetFaultFor(stocktest.LostReply, stocktest.OnMethod("ReclaimExpired"))
	_, err := f.m.ReclaimExpired(ctx, 10)
	t.Logf("err: %v", err)
	f.record.SetFault(stocktest.Healthy)
	f.want(f.record, "record (the sweep ran)", "a", 10, 0, 0)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Errorf("ReclaimExpired after the record's sweep wrote: %v, want ErrUnknownOutcome", err)
	}
	if errors.Is(err, stock.ErrUnavailable) {
		t.Errorf("ReclaimExpired after the record's sweep wrote: %v matches stock.ErrUnavailable (nothing applied) together with ErrUnknownOutcome", err)
	}
}
