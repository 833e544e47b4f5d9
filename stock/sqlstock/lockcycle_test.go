package sqlstock_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A writer outside the Store that locks an order's rows in the other
// order (r1, then r0) while a Deduct of {r0, r1} holds r0 and waits for
// r1 closes a lock cycle. PostgreSQL finds such a cycle only by a
// deadlock check, deadlock_timeout (1s by default) after a waiter began
// to wait, and until then the writer, and everything queued behind
// either, waits. The first such cycle lasts that long (the Deduct ends it
// with a deadlock or its lock wait, and runs again); from then on the
// Store waits for a row only briefly while it holds another, then lets
// go of r0 and waits for r1's holder holding nothing: the writer's next
// cycle ends long before any deadlock check, and each Deduct takes its
// units once the writer commits.
func TestSecondCycleWithAReverseWriterEndsBeforeTheDeadlockCheck(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 8)
	ctx := t.Context()
	deadlockTimeout := serverDeadlockTimeout(t, db.DB)
	for _, st := range []sqlstock.Strategy{sqlstock.Atomic, sqlstock.Optimistic, sqlstock.Pessimistic} {
		t.Run(st.String(), func(t *testing.T) {
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, Strategy: st, LockWait: 10 * time.Second})
			for _, sku := range []string{"r0", "r1"} {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			for cycle := range 2 {
				took := writerCycle(t, db.DB, table, func() error {
					return s.Deduct(context.WithoutCancel(ctx), stock.Order{ID: fmt.Sprintf("o%d", cycle), UserID: "u1",
						Items: []stock.Item{{SKU: "r0", Qty: 1}, {SKU: "r1", Qty: 2}}})
				})
				if cycle > 0 && took >= deadlockTimeout/2 {
					t.Errorf("the writer's second cycle: it waited %v for r0, which the Deduct held while it waited for r1 (deadlock_timeout %v)", took, deadlockTimeout)
				}
			}
			for sku, want := range map[string]int64{"r0": 2, "r1": 4} {
				lv, err := s.Levels(ctx, sku)
				if err != nil {
					t.Fatal(err)
				}
				if lv.Held != want || lv.Available != 10-want {
					t.Errorf("%s: %+v, want %d held", sku, lv, want)
				}
			}
		})
	}
}

// writerTx begins the transaction of a writer outside the Store whose own
// deadlock check waits a minute, where the server lets it: a cycle with a
// Deduct is then found by the Deduct's check (deadlock_timeout after it
// began to wait), so the Deduct, not the writer, meets it.
func writerTx(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL deadlock_timeout = '1min'"); err != nil {
		_ = tx.Rollback() // not a superuser: the server's deadlock_timeout
		return db.BeginTx(ctx, nil)
	}
	return tx, nil
}

// serverDeadlockTimeout reads the server's deadlock_timeout.
func serverDeadlockTimeout(t *testing.T, db *sql.DB) time.Duration {
	t.Helper()
	var ms int64
	if err := db.QueryRowContext(t.Context(), "SELECT setting::bigint FROM pg_settings WHERE name = 'deadlock_timeout'").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// writerCycle runs one lock cycle of a writer outside the Store with
// deduct, a call of the Store's that takes r0 and r1 of table: the writer
// takes r1 (writerTx), deduct starts, and once deduct waits for a lock
// (holding r0, or holding nothing) the writer updates r0 and commits.
// deduct must then succeed. It returns how long the writer waited for r0.
func writerCycle(t *testing.T, db *sql.DB, table string, deduct func() error) time.Duration {
	t.Helper()
	ctx := t.Context()
	w, err := writerTx(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Rollback() }()
	update := "UPDATE " + quote(sqlstock.Postgres, table) + " SET available = available WHERE sku = $1"
	if _, err := w.ExecContext(ctx, update, "r1"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- deduct() }()
	for waits := false; !waits; {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity"+
			" WHERE wait_event_type = 'Lock' AND position($1 in query) > 0", table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the Store answered %v while the writer held r1", err)
		default:
		}
		waits = n > 0
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, err := w.ExecContext(ctx, update, "r0"); err != nil {
		t.Fatalf("the writer's update of r0: %v", err)
	}
	took := time.Since(start)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the Store's call: %v", err)
	}
	return took
}
