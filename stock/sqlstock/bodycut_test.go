package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// late wraps a real driver's connections and, when armed, hands back the
// answer of one statement containing a string, or of one ROLLBACK,
// late: the statement runs at once and its real answer reaches the caller
// the delay later, as on a starved machine (a process that gets no CPU, a
// server that answers slowly).
type late struct {
	drv driver.Driver
	dsn string

	prefix    atomic.Pointer[string]
	execDelay atomic.Int64 // ns; one statement containing prefix
	rbDelay   atomic.Int64 // ns; one ROLLBACK
	fired     atomic.Int32 // delays handed out
}

func (l *late) Connect(context.Context) (driver.Conn, error) {
	c, err := l.drv.Open(l.dsn)
	if err != nil {
		return nil, err
	}
	return &lateConn{Conn: c, l: l}, nil
}

func (l *late) Driver() driver.Driver { return l.drv }

// armExec delays the answer of the next statement that contains prefix.
func (l *late) armExec(prefix string, d time.Duration) {
	l.prefix.Store(&prefix)
	l.execDelay.Store(int64(d))
}

// armRollback delays the answer of the next ROLLBACK.
func (l *late) armRollback(d time.Duration) { l.rbDelay.Store(int64(d)) }

func (l *late) sleepFor(query string) {
	if p := l.prefix.Load(); p != nil && strings.Contains(query, *p) {
		if d := l.execDelay.Swap(0); d > 0 {
			l.fired.Add(1)
			time.Sleep(time.Duration(d))
		}
	}
}

type lateConn struct {
	driver.Conn
	l *late
}

func (c *lateConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &lateTx{Tx: tx, l: c.l}, nil
}

func (c *lateConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	c.l.sleepFor(query)
	return res, err
}

func (c *lateConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	c.l.sleepFor(query)
	return rows, err
}

func (c *lateConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type lateTx struct {
	driver.Tx
	l *late
}

func (t *lateTx) Rollback() error {
	if d := t.l.rbDelay.Swap(0); d > 0 {
		t.l.fired.Add(1)
		time.Sleep(time.Duration(d))
	}
	return t.Tx.Rollback()
}

// lateStore is a PostgreSQL Store of LockWait 200ms (a transaction's
// statements end 250ms after its BEGIN, an attempt three LockWaits after
// the call's start) over a SKU with a per-user limit (so a Deduct runs a
// transaction), on connections through a late connector.
func lateStore(t *testing.T, b backend) (*sqlstock.Store, *late) {
	real := b.open(t)
	l := &late{drv: real.Driver(), dsn: testdb.DSN(t, b.needs[0])}
	db := sqlx.NewDb(sql.OpenDB(l), real.DriverName())
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: 200 * time.Millisecond, MaxGroup: 1})
	if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5}); err != nil {
		t.Fatal(err)
	}
	return s, l
}

// A transaction whose statements' time ran out is rolled back without its
// COMMIT: nothing was applied, and the Deduct answers stock.ErrContention,
// also when the attempt's own time has run out by the time the Store
// looks at the failure (the answer that ended the statements came late,
// or the ROLLBACK's did). It answered stock.ErrUnknownOutcome.
func TestTransactionCutByItsStatementsTimeAppliedNothing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		insert, rollbk time.Duration // the ledger INSERT's answer, the ROLLBACK's, late by
		fired          int32
	}{
		{"starved past the attempt", 650 * time.Millisecond, 0, 1},
		{"a slow rollback past the attempt", 300 * time.Millisecond, 400 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range backends() {
				if b.dialect != sqlstock.Postgres {
					// SQLite runs in-process, its transactions not cut by a
					// deadline; MySQL and MariaDB run the same transactions
					// (txOn), but their lock waits, and so the times here,
					// are whole seconds.
					continue
				}
				t.Run(b.name, func(t *testing.T) {
					b.need(t)
					// A machine that stalls the Deduct before its INSERT
					// is sent (250ms after BEGIN) cuts the transaction
					// before the late answer: another try, on a new Store.
					var s *sqlstock.Store
					var l *late
					var err error
					for try := 0; try < 5 && (l == nil || l.fired.Load() == 0); try++ {
						s, l = lateStore(t, b)
						l.armExec("INSERT INTO", tc.insert)
						l.armRollback(tc.rollbk)
						err = s.Deduct(t.Context(), stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
					}
					if got := l.fired.Load(); got != tc.fired {
						t.Fatalf("%d of %d late answers handed out (Deduct: %v)", got, tc.fired, err)
					}
					if lv, lerr := s.Levels(t.Context(), "a"); lerr != nil || lv.Available != 10 || lv.Held != 0 {
						t.Fatalf("levels %+v, %v; want nothing taken", lv, lerr)
					}
					if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						t.Fatalf("Deduct: %v; want stock.ErrContention (nothing applied), not an unknown outcome", err)
					}
				})
			}
		})
	}
}
