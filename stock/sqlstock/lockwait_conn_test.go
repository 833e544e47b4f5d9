package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// On PostgreSQL the server ends every lock wait of a Store's transaction
// before the deadline of the transaction's statements does: its
// lock_timeout is the time the statements have left (LockWait at most),
// less a margin. So a Deduct that spends its two LockWaits on a row held
// past them answers stock.ErrContention and keeps its connection, on its
// later attempts too (whose statements have less than a LockWait left of
// the call's time). A statement its deadline canceled would have closed
// the connection (pgx does), and the next transaction would dial a new
// one, a round trip that is long on a busy server.
func TestPGLockWaitsEndOnTheServerAndKeepTheConnection(t *testing.T) {
	for _, b := range backends() {
		if b.dialect != sqlstock.Postgres {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			db.SetMaxOpenConns(1)
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, Table: table, LockWait: 300 * time.Millisecond, MaxGroup: 1})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
				t.Fatal(err)
			}
			before := backendPID(t, db)
			release := holdLock(t, b.open(t), b.dialect, table)
			err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			release()
			if !errors.Is(err, stock.ErrContention) {
				t.Fatalf("Deduct under a row held past its two LockWaits: %v, want stock.ErrContention", err)
			}
			if after := backendPID(t, db); after != before {
				t.Errorf("the Store's one connection was closed and dialed again (backend %d, then %d)", before, after)
			}
		})
	}
}

// backendPID is the PostgreSQL backend of a connection of db: with one
// connection allowed, the same number means the same connection.
func backendPID(t *testing.T, db *sqlx.DB) (pid int) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}
