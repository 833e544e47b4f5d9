package memstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// raceStore returns a memstock Store on a test clock at stocktest.Epoch,
// with ls on sale; the test fails if a PutOnSale does.
func raceStore(t *testing.T, ls ...stock.Listing) (*memstock.Store, *stocktest.Clock) {
	t.Helper()
	c := stocktest.NewClock(stocktest.Epoch)
	m := memstock.New(c)
	for _, l := range ls {
		if err := m.PutOnSale(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return m, c
}

// N buyers over two SKUs and a per-user limit: exactly the units on sale
// are taken, each user at most the limit, and every order all-or-nothing.
func TestRaceExactCounts(t *testing.T) {
	ctx := context.Background()
	m, _ := raceStore(t, stock.Listing{SKU: "a", Units: 37, PerUserLimit: 3}, stock.Listing{SKU: "b", Units: 1000})
	const buyers = 400
	var ok, sold, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			o := stock.Order{ID: fmt.Sprint("o", i), UserID: fmt.Sprint("u", i%20), Items: []stock.Item{{SKU: "b", Qty: 2}, {SKU: "a", Qty: 1}}}
			err := m.Deduct(ctx, o)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, stock.ErrSoldOut):
				sold.Add(1)
			case errors.Is(err, stock.ErrLimitReached):
				limited.Add(1)
			default:
				t.Errorf("deduct: %v", err)
			}
			// racing readers
			if _, err := m.Levels(ctx, "a"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 37 {
		t.Fatalf("%d orders took stock, want 37 (soldout %d limited %d)", ok.Load(), sold.Load(), limited.Load())
	}
	la, _ := m.Levels(ctx, "a")
	lb, _ := m.Levels(ctx, "b")
	if la.Available != 0 || la.Held != 37 || lb.Held != 74 || lb.Available != 1000-74 {
		t.Fatalf("levels a %+v b %+v", la, lb)
	}
	var sum int64
	for u := range 20 {
		n, err := m.UserUnits(ctx, "a", fmt.Sprint("u", u))
		if err != nil {
			t.Fatal(err)
		}
		if n > 3 {
			t.Fatalf("user u%d has %d", u, n)
		}
		sum += n
	}
	if sum != 37 {
		t.Fatalf("user units sum %d", sum)
	}
}

// Revert racing Confirm and ExtendHold racing the reclaimer at the
// deadline: every order ends in one state and the counts add up.
func TestRaceEndings(t *testing.T) {
	ctx := context.Background()
	m, c := raceStore(t, stock.Listing{SKU: "a", Units: 200, HoldTTL: time.Second, MaxHoldTTL: time.Hour})
	const n = 100
	for i := range n {
		if err := m.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(999 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprint("o", i)
		wg.Go(func() { _ = m.Confirm(ctx, id) })
		wg.Go(func() { _ = m.Revert(ctx, id) })
		wg.Go(func() { _ = m.ExtendHold(ctx, id, c.Now().Add(time.Minute)) })
		wg.Go(func() { _, _ = m.ReclaimExpired(ctx, 7) })
	}
	wg.Go(func() { c.Advance(time.Millisecond) })
	wg.Wait()
	c.Advance(time.Hour)
	for {
		got, err := m.ReclaimExpired(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("o", i)
	}
	infos, err := m.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	var confirmed int64
	for _, o := range infos {
		if o.State == stock.StateConfirmed {
			confirmed++
		}
		if o.State == stock.StateHeld || o.State == stock.StateUnknown {
			t.Fatalf("order %s ended %v", o.ID, o.State)
		}
	}
	lv, _ := m.Levels(ctx, "a")
	if lv.Held != 0 || lv.Sold != 2*confirmed || lv.Available != 200-2*confirmed {
		t.Fatalf("levels %+v with %d confirmed", lv, confirmed)
	}
}
