package sqlstock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"
)

// querier is what a transaction body runs its statements on: a *sql.Tx,
// a *sql.Conn pinned for SQLite's BEGIN IMMEDIATE, or a caller's
// transaction (DBTX).
type querier = DBTX

// pool is what a Store begins its transactions on: a *sql.DB.
type pool interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	Conn(ctx context.Context) (*sql.Conn, error)
}

// inTx runs fn in one write transaction and commits it. Once BEGIN went
// through, a failure that does not prove nothing was applied (a lost
// connection or an interrupted statement, and above all a COMMIT whose
// reply is lost) is returned as *maybeApplied. A failure to begin (a
// refused dial) was sent nothing and is returned as it is.
//
// PostgreSQL transactions run at READ COMMITTED whatever the server's
// default, so a statement that waited for a row lock sees the rows the
// lock holder committed. MySQL and MariaDB keep the session's level (a
// plain SELECT after the row lock is the transaction's first consistent
// read, so it sees them too). SQLite transactions are BEGIN IMMEDIATE:
// they take the write lock first, so no two writers ever interleave.
func (s *Store) inTx(ctx context.Context, fn func(q querier) error) error {
	return s.inTxOn(ctx, s.db, fn)
}

// inTxOn is inTx on db.
func (s *Store) inTxOn(ctx context.Context, db pool, fn func(q querier) error) error {
	if s.d == SQLite {
		return s.inImmediateTx(ctx, db, fn)
	}
	var opts *sql.TxOptions
	if s.d == Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if s.q.beginLockWait != "" {
		if _, err := tx.ExecContext(ctx, s.q.beginLockWait); err != nil {
			_ = tx.Rollback()
			return err // a setting: nothing written yet
		}
	}
	body, cancel := context.WithDeadline(ctx, s.bodyBy(ctx))
	defer cancel()
	if err := fn(boundedTx{tx, body}); err != nil {
		_ = tx.Rollback()
		if body.Err() != nil && ctx.Err() == nil {
			return &bodyLockWait{err} // COMMIT not sent: nothing applied
		}
		return sent(err)
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback() // COMMIT not sent: nothing applied
		return err
	}
	return sent(tx.Commit())
}

// bodySlack is how much longer than Config.LockWait a transaction's
// statements may run in all (see boundedTx): a single lock wait ends by
// the server's own bound first, with the connection kept.
const bodySlack = 50 * time.Millisecond

// boundedTx runs the statements of a transaction under one deadline,
// Config.LockWait from BEGIN (or the call's budget, if sooner: bodyBy),
// instead of each caller's own. The server bounds each lock wait, but a
// transaction waits once per statement (MariaDB, MySQL), and on
// PostgreSQL one UPDATE of a row others queue for can wait several times:
// for the tuple lock while the waiter ahead of it holds it, then for the
// transaction that holds the row. The deadline keeps the whole body
// within LockWait; COMMIT runs outside it.
type boundedTx struct {
	tx  *sql.Tx
	ctx context.Context
}

func (b boundedTx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	return b.tx.ExecContext(b.ctx, query, args...)
}

func (b boundedTx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return b.tx.QueryContext(b.ctx, query, args...)
}

func (b boundedTx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	return b.tx.QueryRowContext(b.ctx, query, args...)
}

// bodyLockWait is a transaction whose statements ran past Config.LockWait
// in all, or past the call's budget (boundedTx), and were rolled back:
// nothing was applied. It classifies as lock_timeout's own error (SQLSTATE 55P03),
// which the retry loop answers as stock.ErrContention.
type bodyLockWait struct{ err error }

func (e *bodyLockWait) Error() string {
	return "sqlstock: the transaction waited longer than Config.LockWait for row locks: " + e.err.Error()
}

// SQLState returns lock_timeout's code, 55P03.
func (e *bodyLockWait) SQLState() string { return "55P03" }

// sent returns err as *maybeApplied unless it proves that nothing was
// applied.
func sent(err error) error {
	if definite(err) {
		return err
	}
	return &maybeApplied{err}
}

// inImmediateTx runs fn between BEGIN IMMEDIATE and COMMIT on one pinned
// connection. SQLite runs in-process: COMMIT is sent without the caller's
// cancellation (an interrupted COMMIT could not tell whether it applied)
// and a COMMIT that fails leaves the transaction open or rolled back,
// never half-known, so its errors are definite. After any failure the
// transaction is rolled back, and a connection that may still hold one
// (a canceled BEGIN, a failed ROLLBACK) is discarded, never pooled.
func (s *Store) inImmediateTx(ctx context.Context, db pool, fn func(q querier) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, s.q.sqliteBusy); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	if classify(err) == errTransient {
		return err // SQLITE_BUSY: no transaction was started
	}
	if err == nil {
		if err = fn(conn); err == nil {
			if _, err = conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err == nil {
				return nil
			}
		}
	}
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// execWrite runs one autocommit write. The connection is taken first, so
// a refused dial is returned as it is; after the statement was sent, a
// failure that is not the server's reply is returned as *maybeApplied
// (never on SQLite, which runs in-process).
func (s *Store) execWrite(ctx context.Context, query string, args ...any) (int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	n, err := affected(conn.ExecContext(ctx, query, args...))
	if err != nil && s.d != SQLite {
		err = sent(err)
	}
	return n, err
}

// isBadConn reports whether database/sql or the driver found a connection
// dead before using it: nothing was sent on it.
func isBadConn(err error) bool { return errors.Is(err, driver.ErrBadConn) }

// affected returns the rows a write changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
