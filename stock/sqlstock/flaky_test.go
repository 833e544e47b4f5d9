package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Faults a flaky connection injects, once each time one is armed.
const (
	faultNone           int32 = iota
	faultAfterCommit          // COMMIT is applied, its reply is lost
	faultBeforeCommit         // the connection drops before COMMIT: rolled back
	faultAfterWithExec        // a one-statement write (WITH ...) is applied, its reply is lost
	faultAfterExec            // the next statement starting with prefix is applied, its reply is lost
	faultCancelAtCommit       // the caller's context is canceled while COMMIT is applied
)

// flaky wraps a real driver's connections and loses the reply of one
// COMMIT or write when armed, like a network cut at the worst moment. With
// downOnFault set, the network stays down after the fault fires (dials
// refused, pooled connections cut) until down is cleared.
type flaky struct {
	drv         driver.Driver
	dsn         string
	fault       atomic.Int32
	prefix      atomic.Pointer[string]             // of faultAfterExec
	cancel      atomic.Pointer[context.CancelFunc] // of faultCancelAtCommit
	downOnFault atomic.Bool
	down        atomic.Bool
	// Late answers, as on a starved machine: the next statement starting
	// with latePrefix, and the next ROLLBACK, run at once and hand back
	// their real answers execLate and rollbackLate (ns) later; lateFired
	// counts the late answers handed out.
	latePrefix             atomic.Pointer[string]
	execLate, rollbackLate atomic.Int64
	lateFired              atomic.Int32
}

var (
	errCut     = errors.New("flaky: connection reset by peer")
	errRefused = errors.New("flaky: dial tcp: connection refused")
)

// fire disarms fault if it is the armed one, and takes the network down
// if asked to.
func (f *flaky) fire(fault int32) bool {
	if !f.fault.CompareAndSwap(fault, faultNone) {
		return false
	}
	if f.downOnFault.Load() {
		f.down.Store(true)
	}
	return true
}

// armExec loses the reply of the next statement that starts with prefix.
func (f *flaky) armExec(prefix string) {
	f.prefix.Store(&prefix)
	f.fault.Store(faultAfterExec)
}

// armLateExec hands back the answer of the next statement that starts
// with prefix d late.
func (f *flaky) armLateExec(prefix string, d time.Duration) {
	f.latePrefix.Store(&prefix)
	f.execLate.Store(int64(d))
}

// armLateRollback hands back the answer of the next ROLLBACK d late.
func (f *flaky) armLateRollback(d time.Duration) { f.rollbackLate.Store(int64(d)) }

// late sleeps the delay *d armed for an answer, once, if armed and the
// answer is one it is for (is).
func (f *flaky) late(d *atomic.Int64, is bool) {
	if is {
		if ns := d.Swap(0); ns > 0 {
			f.lateFired.Add(1)
			time.Sleep(time.Duration(ns))
		}
	}
}

// lateExec sleeps for a late answer of query, if one is armed for it.
func (f *flaky) lateExec(query string) {
	p := f.latePrefix.Load()
	f.late(&f.execLate, p != nil && strings.HasPrefix(stripBound(query), *p))
}

func (f *flaky) Connect(context.Context) (driver.Conn, error) {
	if f.down.Load() {
		return nil, errRefused
	}
	c, err := f.drv.Open(f.dsn)
	if err != nil {
		return nil, err
	}
	return &flakyConn{Conn: c, f: f}, nil
}
func (f *flaky) Driver() driver.Driver { return f.drv }

type flakyConn struct {
	driver.Conn
	f *flaky
}

func (c *flakyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.f.down.Load() {
		return nil, errCut
	}
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &flakyTx{Tx: tx, f: c.f}, nil
}

func (c *flakyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.f.down.Load() {
		return nil, errCut
	}
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	if err == nil && strings.HasPrefix(query, "WITH") && c.f.fire(faultAfterWithExec) {
		return nil, errCut
	}
	if p := c.f.prefix.Load(); err == nil && p != nil && strings.HasPrefix(stripBound(query), *p) && c.f.fire(faultAfterExec) {
		return nil, errCut
	}
	c.f.lateExec(query)
	return res, err
}

func (c *flakyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.f.down.Load() {
		return nil, errCut
	}
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	c.f.lateExec(query)
	return rows, err
}

func (c *flakyConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type flakyTx struct {
	driver.Tx
	f *flaky
}

func (t *flakyTx) Rollback() error {
	t.f.late(&t.f.rollbackLate, true)
	return t.Tx.Rollback()
}

func (t *flakyTx) Commit() error {
	switch {
	case t.f.down.Load():
		return errCut
	case t.f.fire(faultAfterCommit):
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return errCut
	case t.f.fire(faultBeforeCommit):
		_ = t.Tx.Rollback()
		return errCut
	case t.f.fire(faultCancelAtCommit):
		(*t.f.cancel.Load())()
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return fmt.Errorf("flaky: commit interrupted: %w", context.Canceled)
	}
	return t.Tx.Commit()
}

// serverBackends are the backends whose COMMIT crosses a network: on
// SQLite a failed COMMIT is always definite.
func serverBackends() []backend {
	var out []backend
	for _, b := range backends() {
		if b.dialect != sqlstock.SQLite {
			out = append(out, b)
		}
	}
	return out
}

// openFlaky opens b's database through a flaky connector, on the DSN b
// opens (so on MariaDB with interpolateParams=true, which the faults on a
// statement need: see testdb.DSN).
func openFlaky(t *testing.T, b backend) (*sqlx.DB, *flaky) {
	real := b.open(t)
	f := &flaky{drv: real.Driver(), dsn: testdb.DSN(t, b.needs[0])}
	db := sqlx.NewDb(sql.OpenDB(f), real.DriverName())
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = db.Close() })
	return db, f
}

// stripBound drops MariaDB's SET STATEMENT prefix (the statement's lock
// wait bound), so faults match the statement it runs.
func stripBound(query string) string {
	if strings.HasPrefix(query, "SET STATEMENT ") {
		if i := strings.Index(query, " FOR "); i >= 0 {
			return query[i+len(" FOR "):]
		}
	}
	return query
}
