package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Confirm and Revert in the caller's transaction apply when it commits;
// rolled back, the order stays held. A Confirm past the deadline keeps
// the expiry it answers with.
func TestInTxConfirmAndRevert(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st, Clock: clock})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute})
		for i, id := range []string{"o1", "o2", "o3"} {
			mustOK(t, "Deduct "+id, c.s.Deduct(ctx, mkOrder(id, "u1", mkItem("a", int64(i+1)))))
		}
		c.want("held", "a", 4, 6, 0)

		tx := c.begin(nil)
		mustOK(t, "Confirm o1", c.s.InTx(tx).Confirm(ctx, "o1"))
		mustOK(t, "Revert o2", c.s.InTx(tx).Revert(ctx, "o2"))
		mustOK(t, "Rollback", tx.Rollback())
		c.want("after ROLLBACK", "a", 4, 6, 0)
		c.wantState("after ROLLBACK", "o1", stock.StateHeld)
		c.wantState("after ROLLBACK", "o2", stock.StateHeld)

		tx = c.begin(nil)
		ts := c.s.InTx(tx)
		c.insert(tx, "paid-o1", "paid")
		mustOK(t, "Confirm o1", ts.Confirm(ctx, "o1"))
		mustOK(t, "Revert o2", ts.Revert(ctx, "o2"))
		if err := ts.Revert(ctx, "nope"); !errors.Is(err, stock.ErrUnknownOrder) || errors.Is(err, sqlstock.ErrTxFailed) {
			t.Fatalf("Revert of an unknown order: %v, want unknown order", err)
		}
		c.insert(tx, "refunded-o2", "refunded")
		mustOK(t, "Deduct o4", ts.Deduct(ctx, mkOrder("o4", "u1", mkItem("a", 1))))
		mustOK(t, "Confirm o4", ts.Confirm(ctx, "o4"))
		c.commit(tx)
		c.want("after COMMIT", "a", 5, 3, 2)
		c.wantState("after COMMIT", "o1", stock.StateConfirmed)
		c.wantState("after COMMIT", "o2", stock.StateReverted)
		c.wantRows("after COMMIT", 2, 4)

		clock.Advance(time.Minute)
		tx = c.begin(nil)
		if err := c.s.InTx(tx).Confirm(ctx, "o3"); !errors.Is(err, stock.ErrHoldExpired) || errors.Is(err, sqlstock.ErrTxFailed) {
			t.Fatalf("Confirm past the deadline: %v, want hold expired", err)
		}
		c.commit(tx)
		c.want("after the late Confirm", "a", 8, 0, 2)
		c.wantState("after the late Confirm", "o3", stock.StateExpired)
	})
}
