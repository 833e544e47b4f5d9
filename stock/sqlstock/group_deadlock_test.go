package sqlstock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A group chosen as a deadlock's victim fails none of its orders: the
// database rolls the group back whole, the group splits, and every order
// is taken alone, once. The other transaction locks SKU b, the group locks
// a and waits for b, then the other asks for a: a cycle the database must
// break. It is made the survivor (on MariaDB by writing more rows, which
// InnoDB keeps; on PostgreSQL by a longer deadlock_timeout, so the group's
// check fires first), and it must commit, which proves the group was the
// victim.
func TestGroupDeadlockVictimSplits(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue // one writer: SQLite cannot deadlock
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: 20 * time.Second})
			ctx := t.Context()
			for _, sku := range []string{"a", "b"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
					t.Fatal(err)
				}
			}
			table := s.Tables()[0]
			scratch := testdb.Unique("sgd")
			if _, err := db.ExecContext(ctx, "CREATE TABLE "+scratch+" (n INT)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+scratch) })
			touch := func(sku string) string {
				if b.dialect == sqlstock.Postgres {
					return fmt.Sprintf("UPDATE %s SET available = available WHERE sku = '%s'", table, sku)
				}
				return fmt.Sprintf("UPDATE %s SET available = available + 0 WHERE sku = '%s'", table, sku)
			}

			other, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = other.Rollback() }()
			if b.dialect == sqlstock.Postgres {
				if _, err := other.ExecContext(ctx, "SET LOCAL deadlock_timeout = '20s'"); err != nil {
					t.Fatal(err)
				}
			} else {
				for range 20 {
					if _, err := other.ExecContext(ctx, "INSERT INTO "+scratch+" (n) VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)"); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := other.ExecContext(ctx, touch("b")); err != nil {
				t.Fatal(err)
			}

			orders := []stock.Order{
				{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}},
				{ID: "o2", UserID: "u2", Items: []stock.Item{{SKU: "a", Qty: 3}}},
				{ID: "o3", UserID: "u3", Items: []stock.Item{{SKU: "b", Qty: 4}}},
			}
			done := make(chan []error, 1)
			go func() { done <- s.DeductGroup(ctx, orders) }()
			waitForLockWaiter(t, db, b.dialect, table)
			if _, err := other.ExecContext(ctx, touch("a")); err != nil {
				t.Fatalf("the other transaction was the deadlock's victim (%v): the group was not tested", err)
			}
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}
			errs := <-done
			wantErrs(t, errs, []error{nil, nil, nil})
			infos, err := s.Orders(ctx, []string{"o1", "o2", "o3"})
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range infos {
				if in.State != stock.StateHeld || len(in.Items) != len(orders[i].Items) {
					t.Errorf("order %s: %+v, want held with its %d lines", in.ID, in, len(orders[i].Items))
				}
			}
			for sku, want := range map[string]int64{"a": 5, "b": 5} {
				lv, err := s.Levels(ctx, sku)
				if err != nil || lv.Available != 100-want || lv.Held != want {
					t.Errorf("levels of %s: %+v, %v; want %d held of 100, taken once", sku, lv, err, want)
				}
			}
			// A retry of every order takes nothing more.
			wantErrs(t, s.DeductGroup(ctx, orders), []error{nil, nil, nil})
			if lv, _ := s.Levels(ctx, "a"); lv.Held != 5 {
				t.Errorf("after the retries a has %d held, want 5", lv.Held)
			}
		})
	}
}

// waitForLockWaiter returns once a session of db other than the asking
// one runs a statement on table (the group, waiting for the lock the other
// transaction holds: that one is idle between its statements).
func waitForLockWaiter(t *testing.T, db *sqlx.DB, d sqlstock.Dialect, table string) {
	t.Helper()
	q := "SELECT COUNT(*) FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND command = 'Query' AND INSTR(info, ?) > 0"
	if d == sqlstock.Postgres {
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND strpos(query, $1) > 0"
	}
	for range 500 {
		var n int
		if err := db.QueryRowContext(t.Context(), q, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the group never waited for the other transaction's lock")
}
