package degrade_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// An order the fallback took, with its own hold time, is held at the
// record with the tiered primary's grace on top, so the primary reads its
// gate deadline back; ExtendHold and RevertItems reach it on the node that
// took it (the fallback) and on any other (through the primary, whose gate
// does not know it), each once; the tiered reclaimer returns it at the
// extended deadline, not before.
func TestFallbackOrderExtendedAndPartlyReturned(t *testing.T) {
	for _, c := range []struct{ grace, g time.Duration }{{0, time.Minute}, {30 * time.Second, 30 * time.Second}} {
		t.Run("grace "+c.grace.String(), func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			record, gate := memstock.New(clock), memstock.New(clock)
			tm := tiered.New(gate, record, tiered.Config{Clock: clock, RecordGrace: c.grace})
			d := mustNew(t, tm, nil, degrade.Config{Clock: clock})
			t.Cleanup(d.Close)
			other := mustNew(t, tm, nil, degrade.Config{Clock: clock})
			t.Cleanup(other.Close)
			ctx := t.Context()
			d.SetMode(degrade.ForceFallback)
			if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			lv, _ := record.Levels(ctx, "a")
			if lv.HoldTTL != time.Minute+c.g || lv.MaxHoldTTL != 10*time.Minute+c.g {
				t.Fatalf("fallback listing hold/max %v/%v", lv.HoldTTL, lv.MaxHoldTTL)
			}
			start := clock.Now()
			too := stock.Order{ID: "o0", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}, HoldTTL: 10*time.Minute + time.Millisecond}
			if err := d.Deduct(ctx, too); !errors.Is(err, stock.ErrHoldTooLong) {
				t.Fatalf("fallback Deduct past the max = %v", err)
			}
			o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 4}}, HoldTTL: 3 * time.Minute}
			if err := d.Deduct(ctx, o); err != nil {
				t.Fatal(err)
			}
			d.SetMode(degrade.Auto)
			deadline := func(m stock.OrderReader) time.Duration {
				t.Helper()
				got, err := m.Orders(ctx, []string{"o1"})
				if err != nil {
					t.Fatal(err)
				}
				return got[0].Deadline.Sub(start)
			}
			if r, g := deadline(record), deadline(d); r != 3*time.Minute+c.g || g != 3*time.Minute {
				t.Fatalf("record/flow deadline +%v/+%v", r, g)
			}
			if err := d.ExtendHold(ctx, "o1", start.Add(6*time.Minute)); err != nil {
				t.Fatalf("ExtendHold on the taker: %v", err)
			}
			if r := deadline(record); r != 6*time.Minute+c.g {
				t.Fatalf("record deadline after the taker's extension +%v", r)
			}
			if err := other.ExtendHold(ctx, "o1", start.Add(8*time.Minute)); err != nil {
				t.Fatalf("ExtendHold on another node: %v", err)
			}
			if r, g := deadline(record), deadline(other); r != 8*time.Minute+c.g || g != 8*time.Minute {
				t.Fatalf("record/flow deadline after the other node's extension +%v/+%v", r, g)
			}
			if err := other.ExtendHold(ctx, "o1", start.Add(10*time.Minute+time.Millisecond)); !errors.Is(err, stock.ErrHoldTooLong) {
				t.Fatalf("ExtendHold past the bound = %v", err)
			}

			r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
			for _, n := range []*degrade.Manager{d, other, d} {
				if err := n.RevertItems(ctx, r); err != nil {
					t.Fatalf("RevertItems: %v", err)
				}
				if lv, _ := record.Levels(ctx, "a"); lv.Available != 7 || lv.Held != 3 {
					t.Fatalf("record after RevertItems: %+v", lv)
				}
			}
			if n, _ := record.UserUnits(ctx, "a", "u1"); n != 3 {
				t.Fatalf("UserUnits = %d, want 3", n)
			}
			if got, _ := gate.Orders(ctx, []string{"o1"}); got[0].State != stock.StateUnknown {
				t.Fatalf("the gate has the order: %+v", got[0])
			}

			clock.Advance(7 * time.Minute) // past every earlier deadline
			if _, err := tm.ReclaimExpired(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if lv, _ := record.Levels(ctx, "a"); lv.Available != 7 || lv.Held != 3 {
				t.Fatalf("record before the extended deadline: %+v", lv)
			}
			clock.Advance(time.Minute)
			if _, err := tm.ReclaimExpired(ctx, 10); err != nil {
				t.Fatal(err)
			}
			if lv, _ := record.Levels(ctx, "a"); lv.Available != 10 || lv.Held != 0 {
				t.Fatalf("record at the extended deadline: %+v", lv)
			}
			if err := other.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
				t.Fatalf("Confirm after the deadline = %v", err)
			}
		})
	}
}

// downExtender is a memstock whose ExtendHold cannot be reached.
type downExtender struct{ *memstock.Store }

func (downExtender) ExtendHold(context.Context, string, time.Time) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: stocktest.ErrInjected}
}

// An order this node does not remember is not extended at the fallback
// while the primary cannot answer: the gate may hold it, and would end it
// at its old deadline.
func TestExtendHoldWaitsForThePrimary(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	primary, fallback := downExtender{memstock.New(clock)}, memstock.New(clock)
	d := mustNew(t, primary, fallback, degrade.Config{Clock: clock})
	t.Cleanup(d.Close)
	ctx := t.Context()
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	for _, m := range []stock.Manager{primary, fallback} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, MaxHoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := m.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := fallback.Orders(ctx, []string{"o1"})
	if err := d.ExtendHold(ctx, "o1", clock.Now().Add(time.Minute)); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("ExtendHold with the primary down = %v, want its error", err)
	}
	after, _ := fallback.Orders(ctx, []string{"o1"})
	if !after[0].Deadline.Equal(before[0].Deadline) {
		t.Fatalf("the fallback was extended: %v -> %v", before[0].Deadline, after[0].Deadline)
	}
	// Tiers without the interfaces: refused before anything is sent.
	bare := mustNew(t, struct{ stock.Manager }{primary}, struct{ stock.Manager }{fallback}, degrade.Config{Clock: clock})
	t.Cleanup(bare.Close)
	if err := bare.ExtendHold(ctx, "o1", clock.Now().Add(time.Minute)); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("ExtendHold over tiers without it = %v", err)
	}
	if err := bare.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("RevertItems over tiers without it = %v", err)
	}
}
