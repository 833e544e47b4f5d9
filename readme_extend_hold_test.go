package stockguard_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
)

// README, "Longer and per-order holds": the block lists a SKU with a 10m
// hold time and a 30m MaxHoldTTL, places o-9 with its own 25m hold time,
// and then, under "3-D Secure is slow: push the deadline out", calls
// ExtendHold. The order's deadline is then now + 25m, and "an earlier one
// is a no-op" (the bullet below the block): the block's ExtendHold must ask
// for a later deadline, within the 30m bound, or a reader who copies it
// believes a slow payment has more time when it has none. The test plays
// the block with the README's own ExtendHold duration (the test's clock for
// time.Now()).
func TestREADMEExtendHoldBlockPushesTheDeadlineOut(t *testing.T) {
	shop, _, clock := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	items := []stock.Item{{SKU: "tv", Qty: 1}}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, stock.Order{ID: "o-9", Items: items, HoldTTL: 25 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	extend := readmeExtendHold(t)
	before := deadlineOf(t, shop, "o-9")
	if err := shop.ExtendHold(ctx, "o-9", clock.Now().Add(extend)); err != nil {
		t.Fatal(err)
	}
	if after := deadlineOf(t, shop, "o-9"); !after.After(before) {
		t.Fatalf("the README's ExtendHold (to now+%v) left o-9's deadline at %v (now+%v): not pushed out",
			extend, after, after.Sub(clock.Now()))
	}
}

func deadlineOf(t *testing.T, shop *stockguard.Shop, id string) time.Time {
	t.Helper()
	got, err := shop.Orders(t.Context(), []string{id})
	if err != nil || len(got) != 1 {
		t.Fatalf("Orders(%s): %+v, %v", id, got, err)
	}
	return got[0].Deadline
}

// readmeExtendHold returns how far from now the README's ExtendHold of o-9
// asks the deadline to be.
func readmeExtendHold(t *testing.T) time.Duration {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`shop\.ExtendHold\(ctx, "o-9", time\.Now\(\)\.Add\((\d+) ?\* ?time\.Minute\)\)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md has no shop.ExtendHold(ctx, "o-9", time.Now().Add(N*time.Minute))`)
	}
	n, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * time.Minute
}
