package sqlstock_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A refusal undoes only the refused call: the transaction goes on (on
// PostgreSQL too, whose failed statements would otherwise end it), and
// what it committed is exactly what the accepted calls took.
func TestInTxRefusalLeavesTheTransactionUsable(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 3, PerUserLimit: 2})
		c.put(stock.Listing{SKU: "b", Units: 10})
		tx := c.begin(nil)
		ts := c.s.InTx(tx)
		c.insert(tx, "o1", "placed")
		mustOK(t, "Deduct o1", ts.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 2), mkItem("b", 1))))
		refusals := []struct {
			o    stock.Order
			want error
		}{
			{mkOrder("o2", "u2", mkItem("b", 1), mkItem("a", 3)), stock.ErrSoldOut},
			{mkOrder("o3", "u1", mkItem("a", 1)), stock.ErrLimitReached},
			{mkOrder("o4", "u2", mkItem("b", 1), mkItem("nope", 1)), stock.ErrUnknownSKU},
			{mkOrder("o1", "u1", mkItem("b", 5)), stock.ErrConflict}, // the ledger's primary key refuses it first
			{mkOrder("o5", "", mkItem("a", 1)), stock.ErrInvalid},    // a limited SKU needs a user
		}
		for _, r := range refusals {
			err := ts.Deduct(ctx, r.o)
			if !errors.Is(err, r.want) || errors.Is(err, sqlstock.ErrTxFailed) {
				t.Fatalf("Deduct %s: %v, want %v and a usable transaction", r.o.ID, err, r.want)
			}
			c.insert(tx, "refused-"+r.o.ID, "refused") // the transaction still takes statements
		}
		mustOK(t, "Deduct o6", ts.Deduct(ctx, mkOrder("o6", "u2", mkItem("a", 1))))
		mustOK(t, "Deduct o1 again", ts.Deduct(ctx, mkOrder("o1", "u1", mkItem("b", 1), mkItem("a", 2))))
		if err := ts.Deduct(ctx, mkOrder("o7", "u3", mkItem("a", 1))); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("Deduct o7 of the last unit taken in this transaction: %v, want sold out", err)
		}
		c.commit(tx)
		c.want("after COMMIT", "a", 0, 3, 0)
		c.want("after COMMIT", "b", 9, 1, 0)
		c.wantRows("after COMMIT", 1+int64(len(refusals)), 3)
	})
}

// A user's orders in one transaction are counted against the per-user
// limit one after the other, and with the user's committed orders.
func TestInTxPerUserLimitAcrossOrdersOfOneTransaction(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, PerUserLimit: 3})
		tx := c.begin(nil)
		ts := c.s.InTx(tx)
		mustOK(t, "Deduct o1", ts.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 2))))
		if err := ts.Deduct(ctx, mkOrder("o2", "u1", mkItem("a", 2))); !errors.Is(err, stock.ErrLimitReached) {
			t.Fatalf("Deduct o2: %v, want limit reached", err)
		}
		mustOK(t, "Deduct o3", ts.Deduct(ctx, mkOrder("o3", "u1", mkItem("a", 1))))
		mustOK(t, "Deduct o4", ts.Deduct(ctx, mkOrder("o4", "u2", mkItem("a", 3))))
		c.commit(tx)
		c.want("after COMMIT", "a", 4, 6, 0)
		c.wantRows("after COMMIT", 0, 3)

		tx = c.begin(nil)
		if err := c.s.InTx(tx).Deduct(ctx, mkOrder("o5", "u1", mkItem("a", 1))); !errors.Is(err, stock.ErrLimitReached) {
			t.Fatalf("Deduct o5 over the committed orders: %v, want limit reached", err)
		}
		c.commit(tx)
		c.wantRows("after the second COMMIT", 0, 3)
	})
}

// A transaction whose snapshot is older than a committed order of the
// same user still counts that order: the limit is never passed. MySQL
// and MariaDB count it (their ledger read locks, so it reads the newest
// rows); PostgreSQL under REPEATABLE READ or SERIALIZABLE, and SQLite,
// refuse to write on an old snapshot, which is contention.
func TestInTxLimitCountsOrdersCommittedAfterTheSnapshot(t *testing.T) {
	levels := []sql.IsolationLevel{sql.LevelDefault, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable}
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		for _, level := range levels {
			if b.dialect == sqlstock.SQLite && level != sql.LevelDefault {
				continue
			}
			t.Run(level.String(), func(t *testing.T) {
				c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
				ctx := t.Context()
				c.put(stock.Listing{SKU: "a", Units: 10, PerUserLimit: 1})
				tx := c.begin(&sql.TxOptions{Isolation: level})
				var n int64
				mustOK(t, "read", tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quote(c.d, c.orders)).Scan(&n)) // the snapshot
				mustOK(t, "Deduct o1 outside", c.s.Deduct(ctx, mkOrder("o1", "u1", mkItem("a", 1))))

				err := c.s.InTx(tx).Deduct(ctx, mkOrder("o2", "u1", mkItem("a", 1)))
				oldSnapshotFails := b.dialect == sqlstock.SQLite ||
					(b.dialect == sqlstock.Postgres && (level == sql.LevelRepeatableRead || level == sql.LevelSerializable))
				switch {
				case oldSnapshotFails:
					if !errors.Is(err, sqlstock.ErrTxFailed) || !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						t.Fatalf("Deduct o2 on an old snapshot: %v, want contention in the caller's transaction", err)
					}
					mustOK(t, "Rollback", tx.Rollback())
					tx = c.begin(nil) // the caller runs the transaction again
					if err := c.s.InTx(tx).Deduct(ctx, mkOrder("o2", "u1", mkItem("a", 1))); !errors.Is(err, stock.ErrLimitReached) {
						t.Fatalf("Deduct o2 again: %v, want limit reached", err)
					}
				case !errors.Is(err, stock.ErrLimitReached):
					t.Fatalf("Deduct o2: %v, want limit reached", err)
				}
				c.commit(tx)
				c.want("after COMMIT", "a", 9, 1, 0)
				c.wantRows("after COMMIT", 0, 1)
			})
		}
	})
}

// A remembered limit or hold time that another Store changed is never
// what a Deduct in the caller's transaction decides by: the row's own
// settings are, and the row's units.
func TestInTxStaleSettingsNeverDecide(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		clock := stocktest.NewClock(stocktest.Epoch)
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st, Clock: clock})
		tables := c.s.Tables()
		other, err := sqlstock.New(c.db.DB, sqlstock.Config{Dialect: b.dialect, Table: tables[0], Ledger: tables[1], Clock: clock})
		mustOK(t, "New", err)
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour})
		c.put(stock.Listing{SKU: "b", Units: 10})
		mustOK(t, "PutOnSale elsewhere", other.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 1, HoldTTL: 10 * time.Second}))
		mustOK(t, "Deduct elsewhere", other.Deduct(ctx, mkOrder("x", "u9", mkItem("b", 10))))

		tx := c.begin(nil)
		ts := c.s.InTx(tx)
		if err := ts.Deduct(ctx, mkOrder("o1", "", mkItem("a", 1))); !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("Deduct without a user of a SKU now limited: %v, want invalid", err)
		}
		mustOK(t, "Deduct o2", ts.Deduct(ctx, mkOrder("o2", "u1", mkItem("a", 1))))
		if err := ts.Deduct(ctx, mkOrder("o3", "u1", mkItem("a", 1))); !errors.Is(err, stock.ErrLimitReached) {
			t.Fatalf("Deduct o3: %v, want limit reached", err)
		}
		if err := ts.Deduct(ctx, mkOrder("o4", "u1", mkItem("b", 1))); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("Deduct o4 of a SKU sold out elsewhere: %v, want sold out", err)
		}
		c.commit(tx)
		c.want("after COMMIT", "a", 9, 1, 0)
		c.want("after COMMIT", "b", 0, 10, 0)
		c.wantRows("after COMMIT", 0, 2)
		got, err := c.s.Orders(ctx, []string{"o2"})
		if err != nil || !got[0].Deadline.Equal(stocktest.Epoch.Add(10*time.Second)) {
			t.Fatalf("o2's deadline is %v (%v), want the row's hold time, 10s from now", got[0].Deadline, err)
		}
	})
}
