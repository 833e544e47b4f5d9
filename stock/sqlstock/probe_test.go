package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// probe is a driver connector that stands where a MySQL or MariaDB
// server would: it answers SELECT VERSION() with version, and counts it
// and every other statement. With a real driver behind it (drv) the other
// statements go to that server (and so does SELECT VERSION() when version
// is empty); without one they fail with errNoServer. It can fail
// SELECT VERSION() instead (fail), and hold it until gate is closed.
type probe struct {
	drv     driver.Driver // the real driver, or nil: no server
	dsn     string
	version string        // the answer to SELECT VERSION(), if set
	gate    chan struct{} // when set, SELECT VERSION() waits until it is closed
	arrived chan struct{} // when set, gets one value per SELECT VERSION() received

	fail     atomic.Pointer[error] // when set, SELECT VERSION() fails with it
	versions atomic.Int32          // SELECT VERSION() statements received
	others   atomic.Int32          // every other statement received

	mu   sync.Mutex
	sent []string // the other statements, in order
}

var (
	errNoServer = errors.New("probe: no server behind this connection")
	errDown     = errors.New("probe: dial tcp 127.0.0.1:3306: connection refused")
)

// openProbe returns a pool of at most conns connections on p under
// driverName, closed when the test ends.
func openProbe(t testing.TB, p *probe, driverName string, conns int) *sqlx.DB {
	db := sqlx.NewDb(sql.OpenDB(p), driverName)
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// failWith makes SELECT VERSION() fail with err; nil makes it answer.
func (p *probe) failWith(err error) {
	if err == nil {
		p.fail.Store(nil)
		return
	}
	p.fail.Store(&err)
}

// statements returns the statements other than SELECT VERSION() received.
func (p *probe) statements() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.sent...)
}

func (p *probe) Connect(context.Context) (driver.Conn, error) {
	if p.drv == nil {
		return &probeConn{p: p}, nil
	}
	c, err := p.drv.Open(p.dsn)
	if err != nil {
		return nil, err
	}
	return &probeConn{p: p, Conn: c}, nil
}

// Driver returns the real driver behind the probe, or without one the
// MySQL driver's: the probe stands where a MySQL or MariaDB server would.
func (p *probe) Driver() driver.Driver {
	if p.drv == nil {
		return &mysql.MySQLDriver{}
	}
	return p.drv
}

// probeConn is one connection: a real one in Conn, or none.
type probeConn struct {
	p *probe
	driver.Conn
}

func (c *probeConn) Prepare(query string) (driver.Stmt, error) {
	c.p.other(query)
	if c.Conn == nil {
		return nil, errNoServer
	}
	return c.Conn.Prepare(query)
}

func (c *probeConn) Close() error {
	if c.Conn == nil {
		return nil
	}
	return c.Conn.Close()
}

func (c *probeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *probeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.Conn == nil {
		return probeTx{}, nil
	}
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *probeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.p.other(query)
	if c.Conn == nil {
		return nil, errNoServer
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *probeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if !strings.Contains(query, "VERSION()") {
		c.p.other(query)
		if c.Conn == nil {
			return nil, errNoServer
		}
		return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	}
	c.p.versions.Add(1)
	if c.p.arrived != nil {
		c.p.arrived <- struct{}{}
	}
	if c.p.gate != nil {
		select {
		case <-c.p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	switch err := c.p.fail.Load(); {
	case err != nil:
		return nil, *err
	case c.p.version != "":
		return &versionRows{version: c.p.version}, nil
	case c.Conn == nil:
		return nil, errNoServer
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *probeConn) CheckNamedValue(nv *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (p *probe) other(query string) {
	p.others.Add(1)
	p.mu.Lock()
	p.sent = append(p.sent, query)
	p.mu.Unlock()
}

// probeTx is a transaction on no server.
type probeTx struct{}

func (probeTx) Commit() error   { return errNoServer }
func (probeTx) Rollback() error { return nil }

// versionRows is the one-row answer to SELECT VERSION(), with no
// collation known for the SKU column.
type versionRows struct {
	version string
	done    bool
}

func (r *versionRows) Columns() []string { return []string{"VERSION()", "COLLATION_NAME"} }
func (r *versionRows) Close() error      { return nil }

func (r *versionRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	dest[0], dest[1] = r.version, nil
	return nil
}
