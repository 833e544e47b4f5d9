package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A deadlock inside the callers' transactions (two of them taking two
// SKUs in opposite order) fails one of them with contention and nothing
// partial: once it is rolled back the other commits all it took, and the
// loser's whole transaction run again takes its orders once.
func TestInTxDeadlockFailsOneTransactionWhole(t *testing.T) {
	forEachServerTx(t, []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Pessimistic}, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		c.put(stock.Listing{SKU: "a", Units: 10})
		c.put(stock.Listing{SKU: "b", Units: 10})
		type side struct {
			tx            *sql.Tx
			first, second stock.Order
		}
		sides := []*side{
			{first: mkOrder("t1-a", "", mkItem("a", 1)), second: mkOrder("t1-b", "", mkItem("b", 1))},
			{first: mkOrder("t2-b", "", mkItem("b", 1)), second: mkOrder("t2-a", "", mkItem("a", 1))},
		}
		for _, sd := range sides {
			sd.tx = c.begin(nil)
			c.insert(sd.tx, sd.first.ID, "placed")
			mustOK(t, "Deduct "+sd.first.ID, c.s.InTx(sd.tx).Deduct(ctx, sd.first))
		}
		errs := make(chan error, 2)
		for _, sd := range sides {
			go func() {
				err := c.s.InTx(sd.tx).Deduct(ctx, sd.second)
				if err != nil {
					_ = sd.tx.Rollback() // as the caller must: the other side goes on
				}
				errs <- err
			}()
		}
		var failed []error
		for range sides {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		if len(failed) != 1 {
			t.Fatalf("%d transactions failed (%v), want exactly 1", len(failed), failed)
		}
		err := failed[0]
		if !errors.Is(err, sqlstock.ErrTxFailed) || !errors.Is(err, stock.ErrContention) ||
			errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
			t.Fatalf("the deadlock's loser: %v, want contention in the caller's transaction", err)
		}
		var winner, loser *side
		for _, sd := range sides {
			if err := sd.tx.Commit(); err == nil {
				winner = sd
			} else {
				loser = sd
			}
		}
		if winner == nil || loser == nil {
			t.Fatalf("want one transaction to commit and the other rolled back")
		}
		c.want("after the winner's COMMIT", "a", 9, 1, 0)
		c.want("after the winner's COMMIT", "b", 9, 1, 0)
		c.wantRows("after the winner's COMMIT", 1, 2)
		c.wantState("after the winner's COMMIT", loser.first.ID, stock.StateUnknown)

		tx := c.begin(nil)
		c.insert(tx, loser.first.ID, "placed")
		mustOK(t, "Deduct "+loser.first.ID+" again", c.s.InTx(tx).Deduct(ctx, loser.first))
		mustOK(t, "Deduct "+loser.second.ID+" again", c.s.InTx(tx).Deduct(ctx, loser.second))
		c.commit(tx)
		c.want("after the loser ran again", "a", 8, 2, 0)
		c.want("after the loser ran again", "b", 8, 2, 0)
		c.wantRows("after the loser ran again", 2, 4)
	})
}

// A Deduct of an order ID whose transaction is still open waits for it:
// once that commits it answers nil and takes nothing; once that rolls
// back it takes the units itself, once.
func TestInTxSameOrderInTwoTransactions(t *testing.T) {
	forEachServerTx(t, []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Pessimistic}, func(t *testing.T, b backend, st sqlstock.Strategy) {
		for _, commitFirst := range []bool{true, false} {
			c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
			ctx := t.Context()
			c.put(stock.Listing{SKU: "a", Units: 10})
			o := mkOrder("o1", "u1", mkItem("a", 1))
			first, second := c.begin(nil), c.begin(nil)
			mustOK(t, "Deduct in the first", c.s.InTx(first).Deduct(ctx, o))
			done := make(chan error, 1)
			go func() { done <- c.s.InTx(second).Deduct(ctx, o) }()
			select {
			case err := <-done:
				t.Fatalf("the second transaction's Deduct did not wait for the first: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			if commitFirst {
				c.commit(first)
			} else {
				mustOK(t, "Rollback", first.Rollback())
			}
			mustOK(t, "Deduct in the second", <-done)
			c.commit(second)
			c.want("after both", "a", 9, 1, 0)
			c.wantRows("after both", 0, 1)
		}
	})
}
