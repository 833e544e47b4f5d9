package stocktest_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func TestFaultyFaults(t *testing.T) {
	ctx := t.Context()
	f := stocktest.NewFaulty(memstock.New(stocktest.NewClock(stocktest.Epoch)))
	for _, sku := range []string{"a", "b"} {
		if err := f.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	order := func(id, sku string) stock.Order {
		return stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: sku, Qty: 1}}}
	}
	f.SetFault(stocktest.Down)
	err := f.Deduct(ctx, order("o1", "a"))
	var ne net.Error
	if !errors.Is(err, stocktest.ErrInjected) || !errors.As(err, &ne) || stock.IsBusiness(err) {
		t.Fatalf("Deduct while Down = %v, want a non-business net.Error wrapping ErrInjected", err)
	}
	f.SetFault(stocktest.LostReply)
	if err := f.Deduct(ctx, order("o2", "a")); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Deduct with a lost reply = %v", err)
	}
	f.SetFaultFor(stocktest.Down, stocktest.OnSKU("b"))
	if err := f.Deduct(ctx, order("o3", "a")); err != nil {
		t.Fatalf("Deduct of a SKU the fault does not match: %v", err)
	}
	if err := f.Deduct(ctx, order("o4", "b")); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Deduct of the faulty SKU = %v", err)
	}
	f.SetFaultFor(stocktest.Down, stocktest.OnMethod("Revert"))
	if err := f.Revert(ctx, "o3"); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("Revert with Revert down = %v", err)
	}
	var seen []string
	f.SetBefore(func(c stocktest.Call) { seen = append(seen, c.Method+":"+c.OrderID) })
	if err := f.Confirm(ctx, "o3"); err != nil {
		t.Fatal(err)
	}
	f.SetBefore(nil)
	f.SetFault(stocktest.Healthy)
	// o2 (lost reply) and o3 hold a; o1 (down) took nothing.
	if lv, err := f.Levels(ctx, "a"); err != nil || lv.Held != 1 || lv.Sold != 1 || lv.Available != 8 {
		t.Fatalf("Levels(a) = %+v, %v; want 8 available, 1 held, 1 sold", lv, err)
	}
	if len(seen) != 1 || seen[0] != "Confirm:o3" {
		t.Fatalf("hook saw %v, want [Confirm:o3]", seen)
	}
	if n, total := f.Calls("Deduct"), f.TotalCalls(); n != 4 || total != 9 {
		t.Fatalf("Calls(Deduct), TotalCalls() = %d, %d; want 4, 9", n, total)
	}
}

func TestFaultyNarrow(t *testing.T) {
	mem := memstock.New(stocktest.NewClock(stocktest.Epoch))
	full := stocktest.NewFaulty(mem).Narrow()
	if _, ok := full.(stock.Reclaimer); !ok {
		t.Fatal("Narrow of a Reclaimer is not a Reclaimer")
	}
	if _, ok := full.(stock.OrderReader); !ok {
		t.Fatal("Narrow of an OrderReader is not an OrderReader")
	}
	bare := stocktest.NewFaulty(struct{ stock.Manager }{mem})
	if _, ok := bare.Narrow().(stock.Reclaimer); ok {
		t.Fatal("Narrow of a plain Manager is a Reclaimer")
	}
	if _, ok := bare.Narrow().(stock.OrderReader); ok {
		t.Fatal("Narrow of a plain Manager is an OrderReader")
	}
	if _, err := bare.ReclaimExpired(t.Context(), 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("ReclaimExpired of a plain Manager = %v, want ErrUnsupported", err)
	}
}

func TestFaultyUnavailableAndHoldLister(t *testing.T) {
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	f := stocktest.NewFaulty(memstock.New(clock))
	if err := f.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.SetFault(stocktest.Unavailable)
	err := f.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if !errors.Is(err, stock.ErrUnavailable) || !errors.Is(err, stocktest.ErrInjected) || stock.IsBusiness(err) ||
		errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Deduct while Unavailable = %v, want ErrUnavailable and ErrInjected only", err)
	}
	f.SetFault(stocktest.Healthy)
	if lv, err := f.Levels(ctx, "a"); err != nil || lv.Available != 10 {
		t.Fatalf("Levels after an Unavailable Deduct = %+v, %v; want nothing applied", lv, err)
	}
	if err := f.Deduct(ctx, stock.Order{ID: "o2", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.HeldBefore(ctx, clock.Now().Add(time.Minute), 10)
	if err != nil || len(got) != 1 || got[0].ID != "o2" {
		t.Fatalf("HeldBefore = %+v, %v; want [o2]", got, err)
	}
	f.SetFaultFor(stocktest.Down, stocktest.OnMethod("HeldBefore"))
	if _, err := f.HeldBefore(ctx, clock.Now(), 10); !errors.Is(err, stocktest.ErrInjected) {
		t.Fatalf("HeldBefore while down = %v", err)
	}
	if n := f.Calls("HeldBefore"); n != 2 {
		t.Fatalf("Calls(HeldBefore) = %d, want 2", n)
	}
	if _, ok := f.Narrow().(stock.HoldLister); !ok {
		t.Fatal("Narrow of a HoldLister is not a HoldLister")
	}
	bare := stocktest.NewFaulty(struct{ stock.Manager }{memstock.New(clock)})
	if _, ok := bare.Narrow().(stock.HoldLister); ok {
		t.Fatal("Narrow of a plain Manager is a HoldLister")
	}
	if _, err := bare.HeldBefore(ctx, clock.Now(), 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HeldBefore of a plain Manager = %v, want ErrUnsupported", err)
	}
}
