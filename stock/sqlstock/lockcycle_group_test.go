package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A group of two orders of {r0, r1} written in one transaction, by the
// first try (no per-user limit: one UPDATE per SKU for the group's sum)
// or against the rows locked FOR UPDATE (a per-user limit), while a
// writer outside the Store holds r1 and then updates r0: the first cycle
// lasts until the deadlock check, and from then on the group's
// transaction waits for r1 only briefly while it holds r0, lets go and
// waits for the writer holding nothing, so the writer's second cycle ends
// long before any deadlock check. Every order takes its units once.
func TestSecondCycleOfAGroupEndsBeforeTheDeadlockCheck(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 8)
	ctx := t.Context()
	deadlockTimeout := serverDeadlockTimeout(t, db.DB)
	for _, limit := range []int64{0, 50} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, LockWait: 10 * time.Second})
			for _, sku := range []string{"r0", "r1"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100, HoldTTL: time.Hour, PerUserLimit: limit}); err != nil {
					t.Fatal(err)
				}
			}
			items := []stock.Item{{SKU: "r0", Qty: 1}, {SKU: "r1", Qty: 2}}
			for cycle := range 2 {
				took := writerCycle(t, db.DB, table, func() error {
					return errors.Join(s.DeductGroup(context.WithoutCancel(ctx), []stock.Order{
						{ID: fmt.Sprintf("a%d", cycle), UserID: "u1", Items: items},
						{ID: fmt.Sprintf("b%d", cycle), UserID: "u2", Items: items},
					})...)
				})
				if cycle > 0 && took >= deadlockTimeout/2 {
					t.Errorf("the writer's second cycle: it waited %v for r0, which the group held while it waited for r1 (deadlock_timeout %v)", took, deadlockTimeout)
				}
			}
			for sku, want := range map[string]int64{"r0": 4, "r1": 8} {
				lv, err := s.Levels(ctx, sku)
				if err != nil {
					t.Fatal(err)
				}
				if lv.Held != want || lv.Available != 100-want {
					t.Errorf("%s: %+v, want %d held", sku, lv, want)
				}
			}
		})
	}
}
