package stocktest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

func zzSale(t *testing.T, m stock.Manager, l stock.Listing) {
	t.Helper()
	if err := m.PutOnSale(t.Context(), l); err != nil {
		t.Fatalf("PutOnSale(%+v): %v", l, err)
	}
}

func zzWant(t *testing.T, m stock.Manager, sku string, avail, held, sold int64) {
	t.Helper()
	lv, err := m.Levels(t.Context(), sku)
	if err != nil {
		t.Fatalf("Levels(%q): %v", sku, err)
	}
	if lv.Available != avail || lv.Held != held || lv.Sold != sold {
		t.Fatalf("%q: available/held/sold = %d/%d/%d, want %d/%d/%d", sku, lv.Available, lv.Held, lv.Sold, avail, held, sold)
	}
	a, err := m.Available(t.Context(), sku)
	if err != nil || a != avail {
		t.Fatalf("Available(%q) = %d, %v; want %d", sku, a, err, avail)
	}
}

func zzIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if target == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func zzOrder(id, user string, items ...stock.Item) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: items}
}

func zzItem(sku string, q int64) stock.Item { return stock.Item{SKU: sku, Qty: q} }

// "ErrInvalid: the input was refused before anything was written" and the
// validation of a Deduct that fails on a business outcome writes nothing:
// an order ID refused with ErrSoldOut, ErrUnknownSKU, ErrLimitReached or
// ErrHoldTooLong "took nothing", so it is unknown and free to use.
func TestZZRefusedOrderIDIsNotBurned(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 2, HoldTTL: time.Minute})
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 3))), stock.ErrLimitReached, "Deduct past the limit")
		zzSale(t, m, stock.Listing{SKU: "a", Units: 2, PerUserLimit: 2, HoldTTL: time.Minute})
		zzIs(t, m.Deduct(ctx, zzOrder("o2", "u1", zzItem("a", 1), zzItem("nope", 1))), stock.ErrUnknownSKU, "Deduct of unknown SKU")
		zzIs(t, m.Deduct(ctx, stock.Order{ID: "o3", UserID: "u1", Items: []stock.Item{zzItem("a", 1)}, HoldTTL: time.Hour}), stock.ErrHoldTooLong, "Deduct too long")
		zzIs(t, m.Deduct(ctx, zzOrder("o4", "u2", zzItem("a", 2))), nil, "Deduct u2")
		zzIs(t, m.Deduct(ctx, zzOrder("o5", "u1", zzItem("a", 1))), stock.ErrSoldOut, "Deduct sold out")
		for _, id := range []string{"o1", "o2", "o3", "o5"} {
			zzIs(t, m.Confirm(ctx, id), stock.ErrUnknownOrder, "Confirm of refused "+id)
			zzIs(t, m.Revert(ctx, id), stock.ErrUnknownOrder, "Revert of refused "+id)
		}
		if rd, ok := m.(stock.OrderReader); ok {
			infos, err := rd.Orders(ctx, []string{"o1", "o2", "o3", "o5"})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				if in.State != stock.StateUnknown {
					t.Fatalf("Orders: refused order %+v is not unknown", in)
				}
			}
		}
		zzIs(t, m.Revert(ctx, "o4"), nil, "Revert o4")
		// The refused IDs are free: other items under them are not a conflict.
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 1))), nil, "Deduct under a refused ID")
		zzIs(t, m.Deduct(ctx, zzOrder("o5", "u1", zzItem("a", 1))), nil, "Deduct under a refused ID")
		zzWant(t, m, "a", 0, 2, 0)
	})
}

// Restock "fails with ErrUnknownSKU if the SKU is not on sale": nothing was
// applied, so the operation ID is still free.
func TestZZRestockRefusedForUnknownSKUDoesNotBurnOpID(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "op1", SKU: "b", Units: 3}), stock.ErrUnknownSKU, "Restock of SKU not on sale")
		zzSale(t, m, stock.Listing{SKU: "a", Units: 1})
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "op1", SKU: "a", Units: 2}), nil, "Restock under the refused op ID")
		zzWant(t, m, "a", 3, 0, 0)
		zzSale(t, m, stock.Listing{SKU: "b", Units: 0})
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "op2", SKU: "b", Units: 3}), nil, "Restock b")
		zzWant(t, m, "b", 3, 0, 0)
	})
}

// MaxUnits "is the most units a SKU may have available; Restock fails with
// ErrInvalid past it."
func TestZZRestockPastMaxUnitsIsInvalid(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: stock.MaxUnits - 1})
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "op1", SKU: "a", Units: 1}), nil, "Restock to MaxUnits")
		zzWant(t, m, "a", stock.MaxUnits, 0, 0)
		zzIs(t, m.Restock(ctx, stock.Restock{OpID: "op2", SKU: "a", Units: 1}), stock.ErrInvalid, "Restock past MaxUnits")
		zzWant(t, m, "a", stock.MaxUnits, 0, 0)
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "", zzItem("a", stock.MaxQty))), nil, "Deduct MaxQty")
		zzWant(t, m, "a", stock.MaxUnits-stock.MaxQty, stock.MaxQty, 0)
		zzIs(t, m.Confirm(ctx, "o1"), nil, "Confirm")
		zzWant(t, m, "a", stock.MaxUnits-stock.MaxQty, 0, stock.MaxQty)
	})
}

// IDs are byte strings (ValidateID): distinct IDs are distinct SKUs and
// orders, whatever the case, normalization or separators.
func TestZZDistinctIDsStayDistinct(t *testing.T) {
	skus := []string{"a", "A", "é", "e\u0301", "ﬁ", "fi", "a:b", "a:B", "x%", "x_", "ß", "ss", "😀", strings.Repeat("é", stock.MaxIDLen/2)}
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		for i, s := range skus {
			zzSale(t, m, stock.Listing{SKU: s, Units: int64(10 + i)})
		}
		for i, s := range skus {
			zzWant(t, m, s, int64(10+i), 0, 0)
		}
		for i, s := range skus {
			zzIs(t, m.Deduct(ctx, zzOrder(s, s, zzItem(s, int64(i+1)))), nil, "Deduct "+s)
		}
		for i, s := range skus {
			zzWant(t, m, s, 9, int64(i+1), 0)
		}
		zzIs(t, m.Confirm(ctx, "A"), nil, "Confirm A")
		zzWant(t, m, "a", 9, 1, 0)
		zzWant(t, m, "A", 9, 0, 2)
		zzIs(t, m.Revert(ctx, "fi"), nil, "Revert fi")
		zzWant(t, m, "ﬁ", 9, 5, 0)
		zzWant(t, m, "fi", 15, 0, 0)
	})
}

// A 64-line order over 64 SKUs takes all or nothing.
func TestZZWideOrderAllOrNothing(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		var items []stock.Item
		for i := range stock.MaxItems {
			sku := fmt.Sprintf("s%02d", i)
			zzSale(t, m, stock.Listing{SKU: sku, Units: 2})
			items = append(items, zzItem(sku, 2))
		}
		zzSale(t, m, stock.Listing{SKU: "s63", Units: 1})
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "", items...)), stock.ErrSoldOut, "wide order, last line short")
		for i := range stock.MaxItems - 1 {
			zzWant(t, m, fmt.Sprintf("s%02d", i), 2, 0, 0)
		}
		zzIs(t, m.Deduct(ctx, zzOrder("o2", "", append(items, zzItem("s64", 1))...)), stock.ErrInvalid, "65 lines")
		items[63].Qty = 1
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "", items...)), nil, "wide order")
		zzIs(t, m.Revert(ctx, "o1"), nil, "Revert")
		zzIs(t, m.Revert(ctx, "o1"), nil, "Revert again")
		for i := range stock.MaxItems - 1 {
			zzWant(t, m, fmt.Sprintf("s%02d", i), 2, 0, 0)
		}
		zzWant(t, m, "s63", 1, 0, 0)
	})
}

// Bad input to every method is ErrInvalid, never a panic.
func TestZZBadInputIsInvalidEverywhere(t *testing.T) {
	long := strings.Repeat("x", stock.MaxIDLen+1)
	bads := []string{"", long, "a b", "a\x00", "\xff", "a{", "}", "a\u00a0b", "a\u2028"}
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour})
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 3))), nil, "Deduct")
		for _, b := range bads {
			q := fmt.Sprintf("%q", b)
			zzIs(t, m.Confirm(ctx, b), stock.ErrInvalid, "Confirm "+q)
			zzIs(t, m.Revert(ctx, b), stock.ErrInvalid, "Revert "+q)
			_, err := m.Levels(ctx, b)
			zzIs(t, err, stock.ErrInvalid, "Levels "+q)
			_, err = m.Available(ctx, b)
			zzIs(t, err, stock.ErrInvalid, "Available "+q)
			zzIs(t, m.PutOnSale(ctx, stock.Listing{SKU: b, Units: 1}), stock.ErrInvalid, "PutOnSale "+q)
			zzIs(t, m.Restock(ctx, stock.Restock{OpID: b, SKU: "a", Units: 1}), stock.ErrInvalid, "Restock op "+q)
			if b != "" {
				zzIs(t, m.Deduct(ctx, zzOrder("o9", b, zzItem("a", 1))), stock.ErrInvalid, "Deduct user "+q)
			}
			if rd, ok := m.(stock.OrderReader); ok {
				_, err = rd.Orders(ctx, []string{"o1", b})
				zzIs(t, err, stock.ErrInvalid, "Orders "+q)
				_, err = rd.UserUnits(ctx, "a", b)
				zzIs(t, err, stock.ErrInvalid, "UserUnits user "+q)
				_, err = rd.UserUnits(ctx, b, "u1")
				zzIs(t, err, stock.ErrInvalid, "UserUnits sku "+q)
			}
			if x, ok := m.(stock.HoldExtender); ok {
				zzIs(t, x.ExtendHold(ctx, b, clock.Now().Add(time.Minute)), stock.ErrInvalid, "ExtendHold "+q)
			}
			if hr, ok := m.(stock.HoldReverter); ok {
				_, err = hr.RevertHeld(ctx, b)
				zzIs(t, err, stock.ErrInvalid, "RevertHeld "+q)
			}
			if pr, ok := m.(stock.PartialReverter); ok {
				zzIs(t, pr.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "o1", Items: []stock.Item{zzItem(b, 1)}}), stock.ErrInvalid, "RevertItems sku "+q)
			}
		}
		if pr, ok := m.(stock.PartialReverter); ok {
			for _, q := range []int64{0, -1, stock.MaxQty + 1} {
				zzIs(t, pr.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "o1", Items: []stock.Item{zzItem("a", q)}}), stock.ErrInvalid, fmt.Sprint("RevertItems qty ", q))
			}
		}
		if hl, ok := m.(stock.HoldLister); ok {
			_, err := hl.HeldBefore(ctx, clock.Now(), -1)
			zzIs(t, err, stock.ErrInvalid, "HeldBefore -1")
		}
		for _, l := range []stock.Listing{{SKU: "a", Units: 1, Buckets: -1}, {SKU: "a", Units: 1, Buckets: stock.MaxBuckets + 1}, {SKU: "a", Units: 1, MaxHoldTTL: stock.MaxHoldTTL + time.Millisecond}, {SKU: "a", Units: 1, PerUserLimit: stock.MaxUnits + 1}} {
			zzIs(t, m.PutOnSale(ctx, l), stock.ErrInvalid, fmt.Sprintf("PutOnSale %+v", l))
		}
		zzWant(t, m, "a", 7, 3, 0)
	})
}

// ReclaimExpired with a limit of zero or less never panics, and returns nothing.
func TestZZReclaimWithBadLimit(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute})
		zzIs(t, m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 3))), nil, "Deduct")
		clock.Advance(time.Hour)
		r := m.(stock.Reclaimer)
		for _, lim := range []int{0, -1} {
			got, err := r.ReclaimExpired(ctx, lim)
			if err == nil && len(got) > 0 {
				t.Fatalf("ReclaimExpired(%d) reclaimed %+v", lim, got)
			}
			if err != nil && !errors.Is(err, stock.ErrInvalid) {
				t.Fatalf("ReclaimExpired(%d): %v, want nil or ErrInvalid", lim, err)
			}
		}
	})
}

// 50 buyers of one unit each for 10 units, with retries on contention and
// unknown outcomes: exactly 10 succeed, and the books agree.
func TestZZFiftyBuyersTenUnits(t *testing.T) {
	zzEach(t, func(t *testing.T, m stock.Manager, clock *stocktest.Clock) {
		ctx := t.Context()
		zzSale(t, m, stock.Listing{SKU: "a", Units: 10})
		var mu sync.Mutex
		ok, sold := 0, 0
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := zzOrder(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i), zzItem("a", 1))
				var err error
				for range 200 {
					err = m.Deduct(ctx, o)
					if !errors.Is(err, stock.ErrContention) && !errors.Is(err, stock.ErrUnknownOutcome) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, stock.ErrSoldOut):
					sold++
				default:
					t.Errorf("Deduct %s: %v", o.ID, err)
				}
			}()
		}
		wg.Wait()
		if ok != 10 || sold != 40 {
			t.Fatalf("ok %d, sold out %d; want 10, 40", ok, sold)
		}
		zzWant(t, m, "a", 0, 10, 0)
	})
}
