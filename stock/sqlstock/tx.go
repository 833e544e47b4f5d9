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
	return s.inTxOn(ctx, s.db, nil, fn)
}

// inTxRows is inTx of a body that locks the stock rows of skus (sorted,
// distinct), first to last.
//
// A transaction that waits for a row while it holds another closes a
// cycle with any writer that locks the rows in another order. MySQL and
// MariaDB break such a cycle at once, PostgreSQL only deadlock_timeout
// (1s by default) after a waiter began to wait, while every transaction
// queued behind the two waits as long. So on PostgreSQL, for cycleWindow
// after one of the Store's transactions of several rows that could wait
// long ended in a deadlock or a lock wait timeout (a cycle, or a row held
// past LockWait), its transactions of several rows wait only briefly for
// a row while they hold another: the body's statements wait
// laterLockWait at most for each row after the first (see Store.later),
// and so do its statements after that one; if one waited longer, the
// transaction is rolled back (every row let go), the holders of the later
// rows are waited for while none is held (awaitRows), and the body runs
// again in a new transaction, all within the one deadline of the first
// transaction's statements (bodyBy). A cycle then ends within
// laterLockWait, but a row that a queue of transactions keeps held, each
// longer than laterLockWait, can be lost to them until that deadline.
// Otherwise each row is waited for as long as the transaction may, in
// turn behind the transactions queued before it.
func (s *Store) inTxRows(ctx context.Context, skus []string, fn func(q querier) error) error {
	return s.inTxOn(ctx, s.db, skus, fn)
}

// inTxOn is inTx on db of a body that locks the stock rows of skus (see
// inTxRows; nil: none, or rows the body finds itself).
func (s *Store) inTxOn(ctx context.Context, db pool, skus []string, fn func(q querier) error) error {
	if s.d == SQLite {
		return s.inImmediateTx(ctx, db, fn)
	}
	rows := s.d == Postgres && len(skus) > 1
	var by time.Time // when the statements must end, set by the first BEGIN
	for {
		later := rows && time.Now().UnixNano() < s.cycles.Load()
		err := s.txOn(ctx, db, later, &by, fn)
		if rows && (classify(err) == errTransient || !later && classify(err) == errLockWait) {
			s.cycles.Store(time.Now().Add(cycleWindow).UnixNano())
		}
		if !later || classify(err) != errLockWait || !time.Now().Before(by) {
			return err
		}
		if err := s.awaitRows(ctx, by, skus[1:]); err != nil {
			return err
		}
	}
}

// cycleWindow is how long after a transaction of several rows that
// waited as long as it may ended in a deadlock or a lock wait timeout a
// PostgreSQL Store's transactions of several rows wait only
// laterLockWait for a row while they hold another (see inTxRows).
const cycleWindow = time.Minute

// txOn runs fn in one transaction on db and commits it (see inTx), with
// the later rows' short lock waits if later (see inTxRows). Its
// statements end by *by, which it sets when zero.
func (s *Store) txOn(ctx context.Context, db pool, later bool, by *time.Time, fn func(q querier) error) error {
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
	if by.IsZero() {
		*by = s.bodyBy(ctx)
	}
	body, cancel := context.WithDeadline(ctx, *by)
	defer cancel()
	if err := fn(boundedTx{tx, body, later}); err != nil {
		_ = tx.Rollback()
		if bodyCut(ctx, body, *by) {
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

// bodyCut reports whether the statements of a transaction on ctx, run on
// body (which ends at end), ended because their own time ran out: body
// ended while ctx had not, or body's deadline came before ctx's and was
// what ended it. The attempt's context may have ended too by the time the
// body's failure is looked at (after a ROLLBACK's round trip, or on a
// starved process): that does not make a body its own deadline cut, whose
// COMMIT was never sent, a write that may have applied. A body whose end
// is its attempt's (an attempt after an unknown outcome, or a caller's
// deadline that comes first) was ended by the attempt's context.
func bodyCut(ctx, body context.Context, end time.Time) bool {
	switch {
	case body.Err() == nil:
		return false
	case ctx.Err() == nil:
		return true
	}
	d, ok := ctx.Deadline()
	return errors.Is(body.Err(), context.DeadlineExceeded) && (!ok || end.Before(d))
}

// awaitRows waits, holding no lock, for the holders of the stock rows of
// skus to end, one row at a time and until by: each row is read FOR
// SHARE in a statement of its own, whose transaction ends with it. A wait
// that reaches by is a lock wait (bodyLockWait), as the body's would be,
// not the end of the call.
func (s *Store) awaitRows(ctx context.Context, by time.Time, skus []string) error {
	wctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	for _, sku := range skus {
		wait := itoa(max(1, time.Until(by).Milliseconds())) + "ms"
		var one int
		err := s.db.QueryRowContext(wctx, s.q.awaitRow, sku, wait).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) { // no row: the body finds the SKU missing
			if wctx.Err() != nil && ctx.Err() == nil {
				return &bodyLockWait{err} // a read: nothing applied
			}
			return err
		}
	}
	return nil
}

// later returns stmt for the i-th stock row of a body of inTxRows, or on
// PostgreSQL within such a transaction, when i > 0, its variant whose
// lock wait is laterLockWait.
func (s *Store) later(q querier, i int, stmt string) string {
	if b, ok := q.(boundedTx); ok && b.later && i > 0 {
		if l, ok := s.q.later[stmt]; ok {
			return l
		}
	}
	return stmt
}

// lockStockIn is queries.lockStockIn for a body on q: within a
// transaction of inTxRows on PostgreSQL, the rows after the first wait
// laterLockWait at most.
func (s *Store) lockStockIn(q querier, n int) string {
	if b, ok := q.(boundedTx); ok && b.later && n > 1 {
		return s.q.lockStockLater(n)
	}
	return s.q.lockStockIn(n)
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
	// later: a transaction of inTxRows on PostgreSQL, whose later rows
	// wait laterLockWait at most (Store.later).
	later bool
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

// laterLockWait is how long, on PostgreSQL, a Store's transaction waits
// for the lock of an order's stock row while it holds the lock of another
// (see inTxRows), or Config.LockWait if that is shorter. A transaction
// queued behind another buyer's (a few round trips) waits less; one that
// waited longer lets go of its rows, waits for the holder holding none,
// and runs again.
const laterLockWait = 10 * time.Millisecond

// bodyLockWait is a transaction whose statements ran past Config.LockWait
// in all, or past the call's budget (boundedTx), and were rolled back, or
// an autocommit write that got no connection or was answered by the
// server within its LockWait (cutAtLockWait): nothing was applied. It classifies as lock_timeout's own error (SQLSTATE 55P03),
// which the retry loop answers as stock.ErrContention.
type bodyLockWait struct{ err error }

func (e *bodyLockWait) Error() string {
	return "sqlstock: the statements waited longer than Config.LockWait for a connection or row locks: " + e.err.Error()
}

// SQLState returns lock_timeout's code, 55P03.
func (e *bodyLockWait) SQLState() string { return "55P03" }

// cutAtLockWait is the answer of op's autocommit write (execWrite) whose
// context ended at its LockWait (takeOnePG, ExtendHold on PostgreSQL)
// with err. A write that may have applied (*maybeApplied: the statement
// was sent and canceled) is answered stock.ErrUnknownOutcome now, not run
// again here (a re-run would wait as long again; the caller's retry
// tells). Any other failure applied nothing, whether the statement was
// never sent (no connection came) or the server answered it: a lock wait
// (bodyLockWait), run again while the call has time.
func cutAtLockWait(op string, err error) error {
	var ma *maybeApplied
	if errors.As(err, &ma) {
		return &UnknownOutcomeError{Op: op, Attempts: 1, Last: err}
	}
	return &bodyLockWait{err}
}

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
