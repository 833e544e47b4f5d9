package sqlstock_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// openLostReply returns a pool on b's database for the Store, and one on
// the same database, through a flaky connector, for the caller.
func openLostReply(t *testing.T, b backend) (store, callers *sqlx.DB, l *flaky) {
	t.Helper()
	driverName, dsn := source(t, b)
	store = testdb.Open(t, driverName, dsn, 4)
	l = &flaky{drv: store.Driver(), dsn: dsn}
	callers = sqlx.NewDb(sql.OpenDB(l), driverName)
	callers.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = callers.Close() })
	return store, callers, l
}

// The caller's COMMIT whose reply is lost is resolved by running the
// whole transaction again with the same order ID: if the first COMMIT
// applied, Deduct answers nil and takes nothing more; if it did not, the
// units are taken once.
func TestInTxLostCommitIsResolvedByRunningTheTransactionAgain(t *testing.T) {
	forEachTx(t, []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Pessimistic}, func(t *testing.T, b backend, st sqlstock.Strategy) {
		storeDB, callers, l := openLostReply(t, b)
		c := newCaller(t, b, storeDB, sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, PerUserLimit: 2})

		// place is the caller's transaction: its order row, if not there
		// yet, and the order's stock.
		place := func(o stock.Order) error {
			tx, err := callers.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			var n int64
			if err := tx.QueryRowContext(ctx, callers.Rebind("SELECT COUNT(*) FROM "+quote(c.d, c.orders)+" WHERE id = ?"), o.ID).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				c.insert(tx, o.ID, "placed")
			}
			if err := c.s.InTx(tx).Deduct(ctx, o); err != nil {
				return err
			}
			return tx.Commit()
		}
		steps := []struct {
			fault       int32
			o           stock.Order
			avail, held int64 // after the lost COMMIT
			rows        int64
		}{
			{faultAfterCommit, mkOrder("o1", "u1", mkItem("a", 2)), 8, 2, 1},
			{faultBeforeCommit, mkOrder("o2", "u2", mkItem("a", 2)), 8, 2, 1},
		}
		for _, s := range steps {
			l.fault.Store(s.fault)
			if err := place(s.o); !errors.Is(err, errCut) {
				t.Fatalf("%s: COMMIT answered %v, want its reply lost", s.o.ID, err)
			}
			c.want(s.o.ID+" after the lost COMMIT", "a", s.avail, s.held, 0)
			c.wantRows(s.o.ID+" after the lost COMMIT", s.rows, s.rows)
			mustOK(t, s.o.ID+" run again", place(s.o))
			mustOK(t, s.o.ID+" run once more", place(s.o))
		}
		c.want("after both", "a", 6, 4, 0)
		c.wantRows("after both", 2, 2)
		// The limit saw each order once: u1 may take 2 - 2 = 0 more.
		if err := place(mkOrder("o3", "u1", mkItem("a", 1))); !errors.Is(err, stock.ErrLimitReached) {
			t.Fatalf("o3: %v, want limit reached", err)
		}
	})
}
