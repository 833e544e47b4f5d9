package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// The handles a caller's transaction comes in, and the pools.
var (
	_ sqlstock.DBTX = (*sql.Tx)(nil)
	_ sqlstock.DBTX = (*sqlx.Tx)(nil)
	_ sqlstock.DBTX = (*sql.Conn)(nil)
	_ sqlstock.DBTX = (*sql.DB)(nil)
	_ sqlstock.DBTX = (*sqlx.DB)(nil)
)

var txStrategies = []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Pessimistic, sqlstock.Optimistic}

// needServer skips t when b lives on a real server that is not given.
func needServer(t testing.TB, b backend) {
	t.Helper()
	switch b.dialect {
	case sqlstock.MySQL, sqlstock.MariaDB:
		testdb.Need(t, testdb.MySQL)
	case sqlstock.Postgres:
		testdb.Need(t, testdb.Postgres)
	}
}

// forEachTx runs f for every backend and each of strategies.
func forEachTx(t *testing.T, strategies []sqlstock.Strategy, f func(t *testing.T, b backend, st sqlstock.Strategy)) {
	for _, b := range backends() {
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				needServer(t, b)
				f(t, b, st)
			})
		}
	}
}

// forEachServerTx is forEachTx on MariaDB and PostgreSQL (also for tests
// of the Store alone that need another transaction to hold rows): SQLite has one
// writer, so its transactions never hold rows that another one waits for.
func forEachServerTx(t *testing.T, strategies []sqlstock.Strategy, f func(t *testing.T, b backend, st sqlstock.Strategy)) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue
		}
		for _, st := range strategies {
			t.Run(b.name+"/"+st.String(), func(t *testing.T) {
				needServer(t, b)
				f(t, b, st)
			})
		}
	}
}

// caller is a service that writes its own order row and takes the stock
// in one transaction: a Store, and the service's table of orders, on one
// database.
type caller struct {
	t      *testing.T
	db     *sqlx.DB
	s      *sqlstock.Store
	d      sqlstock.Dialect
	orders string
}

func newCaller(t *testing.T, b backend, db *sqlx.DB, cfg sqlstock.Config) *caller {
	t.Helper()
	cfg.Dialect = b.dialect
	c := &caller{t: t, db: db, s: newStore(t, db, cfg), d: b.dialect, orders: testdb.Unique("sgo")}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+quote(c.d, c.orders)+
		" (id VARCHAR(64) NOT NULL PRIMARY KEY, note VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(ctx, "DROP TABLE "+quote(c.d, c.orders)); err != nil {
			t.Errorf("drop %s: %v", c.orders, err)
		}
	})
	return c
}

func (c *caller) put(l stock.Listing) {
	c.t.Helper()
	if err := c.s.PutOnSale(c.t.Context(), l); err != nil {
		c.t.Fatal(err)
	}
}

// begin opens a transaction of the caller's, rolled back when the test
// ends if it is still open.
func (c *caller) begin(opts *sql.TxOptions) *sql.Tx {
	c.t.Helper()
	tx, err := c.db.BeginTx(c.t.Context(), opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// insert writes the caller's own row id through q.
func (c *caller) insert(q sqlstock.DBTX, id, note string) {
	c.t.Helper()
	if _, err := q.ExecContext(c.t.Context(), c.db.Rebind("INSERT INTO "+quote(c.d, c.orders)+" (id, note) VALUES (?, ?)"), id, note); err != nil {
		c.t.Fatalf("insert the caller's row %s: %v", id, err)
	}
}

func (c *caller) commit(tx *sql.Tx) {
	c.t.Helper()
	if err := tx.Commit(); err != nil {
		c.t.Fatal(err)
	}
}

// count counts the committed rows of table.
func (c *caller) count(table string) int64 {
	c.t.Helper()
	var n int64
	if err := c.db.QueryRowContext(c.t.Context(), "SELECT COUNT(*) FROM "+quote(c.d, table)).Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// want checks the committed levels of sku.
func (c *caller) want(when, sku string, avail, held, sold int64) {
	c.t.Helper()
	lv, err := c.s.Levels(c.t.Context(), sku)
	if err != nil || lv.Available != avail || lv.Held != held || lv.Sold != sold {
		c.t.Fatalf("%s: %s is available/held/sold %d/%d/%d (%v), want %d/%d/%d",
			when, sku, lv.Available, lv.Held, lv.Sold, err, avail, held, sold)
	}
}

// wantRows checks how many rows the caller's table and the ledger have
// committed.
func (c *caller) wantRows(when string, orders, ledger int64) {
	c.t.Helper()
	if got := c.count(c.orders); got != orders {
		c.t.Fatalf("%s: the caller's table has %d rows, want %d", when, got, orders)
	}
	if got := c.count(c.s.Tables()[1]); got != ledger {
		c.t.Fatalf("%s: the ledger has %d rows, want %d", when, got, ledger)
	}
}

// wantState checks the committed state of an order.
func (c *caller) wantState(when, id string, want stock.State) {
	c.t.Helper()
	got, err := c.s.Orders(c.t.Context(), []string{id})
	if err != nil || got[0].State != want {
		c.t.Fatalf("%s: order %s is %v (%v), want %v", when, id, got[0].State, err, want)
	}
}

func mustOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func mkOrder(id, user string, items ...stock.Item) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: items}
}

func mkItem(sku string, qty int64) stock.Item { return stock.Item{SKU: sku, Qty: qty} }

// A Deduct in the caller's transaction is seen by no one until the
// caller commits; then the stock, the ledger and the caller's own row are
// there together.
func TestInTxCommitTakesTheStockWithTheCallersRow(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, PerUserLimit: 2})
		c.put(stock.Listing{SKU: "b", Units: 5})
		tx := c.begin(nil)
		c.insert(tx, "o1", "placed")
		mustOK(t, "Deduct", c.s.InTx(tx).Deduct(ctx, mkOrder("o1", "u1", mkItem("b", 1), mkItem("a", 2))))
		c.want("before COMMIT", "a", 10, 0, 0)
		c.wantRows("before COMMIT", 0, 0)
		c.commit(tx)
		c.want("after COMMIT", "a", 8, 2, 0)
		c.want("after COMMIT", "b", 4, 1, 0)
		c.wantRows("after COMMIT", 1, 2)
		c.wantState("after COMMIT", "o1", stock.StateHeld)
	})
}

// A rollback by the caller leaves nothing taken and no ledger row, so the
// order ID is free: a later Deduct of it takes the units once.
func TestInTxRollbackTakesNothing(t *testing.T) {
	forEachTx(t, txStrategies, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10, PerUserLimit: 2})
		c.put(stock.Listing{SKU: "b", Units: 5})
		o := mkOrder("o1", "u1", mkItem("a", 2), mkItem("b", 1))
		tx := c.begin(nil)
		c.insert(tx, "o1", "placed")
		mustOK(t, "Deduct", c.s.InTx(tx).Deduct(ctx, o))
		mustOK(t, "Rollback", tx.Rollback())
		c.want("after ROLLBACK", "a", 10, 0, 0)
		c.want("after ROLLBACK", "b", 5, 0, 0)
		c.wantRows("after ROLLBACK", 0, 0)
		c.wantState("after ROLLBACK", "o1", stock.StateUnknown)

		tx = c.begin(nil)
		c.insert(tx, "o1", "placed again")
		mustOK(t, "Deduct again", c.s.InTx(tx).Deduct(ctx, o))
		c.commit(tx)
		c.want("taken again", "a", 8, 2, 0)
		c.wantRows("taken again", 1, 2)
	})
}

// Every handle a Go caller has works: transactions (*sql.Tx, *sqlx.Tx, a
// *sql.Conn after BEGIN) hold the call until COMMIT; pools (*sql.DB,
// *sqlx.DB) run each call in a transaction of its own.
func TestInTxHandleTypes(t *testing.T) {
	forEachTx(t, []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Pessimistic}, func(t *testing.T, b backend, st sqlstock.Strategy) {
		c := newCaller(t, b, b.open(t), sqlstock.Config{Strategy: st})
		ctx := t.Context()
		c.put(stock.Listing{SKU: "a", Units: 10})
		type handle struct {
			h   sqlstock.DBTX
			end func() error // commits; nil for a pool
		}
		handles := []struct {
			name string
			open func() handle
		}{
			{"*sql.Tx", func() handle {
				tx := c.begin(nil)
				return handle{tx, tx.Commit}
			}},
			{"*sqlx.Tx", func() handle {
				tx, err := c.db.BeginTxx(ctx, nil)
				mustOK(t, "BeginTxx", err)
				t.Cleanup(func() { _ = tx.Rollback() })
				return handle{tx, tx.Commit}
			}},
			{"*sql.Conn", func() handle {
				conn, err := c.db.Conn(ctx)
				mustOK(t, "Conn", err)
				t.Cleanup(func() { _ = conn.Close() })
				_, err = conn.ExecContext(ctx, "BEGIN")
				mustOK(t, "BEGIN", err)
				return handle{conn, func() error {
					_, err := conn.ExecContext(ctx, "COMMIT")
					return errors.Join(err, conn.Close())
				}}
			}},
			{"*sql.DB", func() handle { return handle{c.db.DB, nil} }},
			{"*sqlx.DB", func() handle { return handle{c.db, nil} }},
		}
		for i, h := range handles {
			id, n := "o-"+h.name, int64(i)
			hd := h.open()
			mustOK(t, h.name+" Deduct", c.s.InTx(hd.h).Deduct(ctx, mkOrder(id, "", mkItem("a", 1))))
			if err := c.s.InTx(hd.h).Deduct(ctx, mkOrder("big", "", mkItem("a", 100))); !errors.Is(err, stock.ErrSoldOut) {
				t.Fatalf("%s Deduct of too many: %v, want sold out", h.name, err)
			}
			if hd.end != nil {
				c.want(h.name+" before COMMIT", "a", 10-n, 0, n)
				mustOK(t, h.name+" COMMIT", hd.end())
			}
			c.want(h.name+" after Deduct", "a", 9-n, 1, n)
			hd = h.open()
			mustOK(t, h.name+" Confirm", c.s.InTx(hd.h).Confirm(ctx, id))
			if hd.end != nil {
				mustOK(t, h.name+" COMMIT", hd.end())
			}
			c.want(h.name+" after Confirm", "a", 9-n, 0, n+1)
			c.wantRows(h.name+" after Confirm", 0, n+1)
		}
	})
}

// A call refused before anything is sent leaves the transaction as it
// was: a nil handle and invalid input are stock.ErrInvalid, a context
// already over is its own error in a *TxError.
func TestInTxRefusedBeforeAnythingIsSent(t *testing.T) {
	b := backends()[0]
	c := newCaller(t, b, b.open(t), sqlstock.Config{})
	c.put(stock.Listing{SKU: "a", Units: 1})
	ctx := t.Context()
	if err := c.s.InTx(nil).Deduct(ctx, mkOrder("o1", "", mkItem("a", 1))); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("Deduct on a nil handle: %v, want invalid", err)
	}
	tx := c.begin(nil)
	ts := c.s.InTx(tx)
	if err := ts.Deduct(ctx, mkOrder("o1", "", mkItem("a", 0))); !errors.Is(err, stock.ErrInvalid) || errors.Is(err, sqlstock.ErrTxFailed) {
		t.Fatalf("Deduct of no units: %v, want invalid", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range map[string]func() error{
		"Deduct":  func() error { return ts.Deduct(done, mkOrder("o1", "", mkItem("a", 1))) },
		"Confirm": func() error { return ts.Confirm(done, "o1") },
		"Revert":  func() error { return ts.Revert(done, "o1") },
	} {
		err := call()
		if !errors.Is(err, context.Canceled) || !errors.Is(err, sqlstock.ErrTxFailed) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("%s with a canceled context: %v, want context.Canceled in a *TxError", name, err)
		}
		var te *sqlstock.TxError
		if !errors.As(err, &te) || te.Op != strings.ToLower(name) {
			t.Fatalf("%s with a canceled context: %v, want a *TxError of its op", name, err)
		}
	}
	c.commit(tx)
	c.want("after", "a", 1, 0, 0)
	c.wantRows("after", 0, 0)
}
