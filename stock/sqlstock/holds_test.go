package sqlstock_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

var _ stock.HoldLister = (*sqlstock.Store)(nil)

// HeldBefore counts orders, not lines: every line of a listed order comes
// with it, and an order's lines are never split by the limit.
func TestHeldBeforeListsWholeOrders(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Clock: clock})
			ctx := t.Context()
			for _, sku := range []string{"a", "b", "c"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			orders := []stock.Order{
				{ID: "z-first", UserID: "u1", Items: []stock.Item{{SKU: "c", Qty: 3}, {SKU: "a", Qty: 1}, {SKU: "b", Qty: 2}}},
				{ID: "a-second", Items: []stock.Item{{SKU: "b", Qty: 1}, {SKU: "a", Qty: 2}}},
				{ID: "m-third", UserID: "u2", Items: []stock.Item{{SKU: "c", Qty: 1}}},
			}
			for _, o := range orders {
				if err := s.Deduct(ctx, o); err != nil {
					t.Fatal(err)
				}
				clock.Advance(time.Second)
			}
			got, err := s.HeldBefore(ctx, clock.Now().Add(time.Hour), 2)
			if err != nil {
				t.Fatal(err)
			}
			want := []stock.OrderInfo{
				{ID: "z-first", UserID: "u1", State: stock.StateHeld, Deadline: stocktest.Epoch.Add(time.Minute),
					Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 2}, {SKU: "c", Qty: 3}}},
				{ID: "a-second", State: stock.StateHeld, Deadline: stocktest.Epoch.Add(time.Minute + time.Second),
					Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}},
			}
			if !slices.EqualFunc(got, want, sameInfo) {
				t.Fatalf("HeldBefore = %+v\nwant %+v", got, want)
			}
			// Exactly at a deadline is due; a confirmed order is not held.
			if err := s.Confirm(ctx, "z-first"); err != nil {
				t.Fatal(err)
			}
			got, err = s.HeldBefore(ctx, stocktest.Epoch.Add(time.Minute+time.Second), 10)
			if err != nil || len(got) != 1 || got[0].ID != "a-second" {
				t.Fatalf("HeldBefore at a-second's deadline = %+v, %v; want [a-second]", got, err)
			}
			if _, err := s.HeldBefore(ctx, clock.Now(), 0); !errors.Is(err, stock.ErrInvalid) {
				t.Fatalf("HeldBefore with limit 0: %v, want stock.ErrInvalid", err)
			}
		})
	}
}

func sameInfo(a, b stock.OrderInfo) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.State == b.State && a.Deadline.Equal(b.Deadline) && slices.Equal(a.Items, b.Items)
}
