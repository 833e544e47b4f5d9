package stockguard_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The Shop refuses Reconcile.DryRun and sends the user to a Reconciler of
// their own: Shop.NewReconciler, named in the refusal. A Reconciler made
// that way over a Shop with its own RecordGrace derives the gate hold time
// from the flow (issue 23: "a part wired by hand must either derive the
// setting itself or refuse a wiring that contradicts its partner"): a dry
// run over a shop in agreement reports nothing, and a pass leaves the gate
// the listing's hold time (reconcile.New over the same stores, which
// cannot know the grace, reported the SKU and gave the gate 7m30s for a
// 10m listing). A cfg that sets what it derives is refused.
func TestOwnReconcilerOverAShopKeepsTheHoldTime(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	_, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, stockguard.Config{Reconcile: reconcile.Config{DryRun: true}})
	if !errors.Is(err, stock.ErrInvalid) || !strings.Contains(err.Error(), "Shop.NewReconciler") {
		t.Errorf("New with Reconcile.DryRun: %v, want ErrInvalid naming Shop.NewReconciler", err)
	}

	shop, _, _ := shopOn(t, stockguard.Config{Flow: tiered.Config{RecordGrace: 5 * time.Minute}})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := shop.NewReconciler(reconcile.Config{GateHold: func(d time.Duration) time.Duration { return d }}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("NewReconciler with GateHold set: %v, want ErrInvalid", err)
	}
	dry, err := shop.NewReconciler(reconcile.Config{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := dry.RepairAll(ctx)
	if err != nil {
		t.Errorf("dry run: %v", err)
	}
	for _, c := range rep.Corrections {
		t.Errorf("dry run over a shop in agreement reports %s: %+v", c.SKU, c)
	}
	own, err := shop.NewReconciler(reconcile.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.RepairAll(ctx); err != nil {
		t.Errorf("pass: %v", err)
	}
	if lv := levels(t, shop.Gate()); lv.HoldTTL != 10*time.Minute {
		t.Errorf("gate hold time after a pass of a Reconciler of one's own: %v, want the listing's 10m", lv.HoldTTL)
	}
}
