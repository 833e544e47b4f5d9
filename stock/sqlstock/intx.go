package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/internal/typednil"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// DBTX is a handle statements run on, the three methods database/sql's
// *sql.Tx, *sql.Conn and *sql.DB share (and so sqlx's *sqlx.Tx and
// *sqlx.DB, and the DBTX interface sqlc generates); see Store.InTx.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Execer is DBTX, under its former name.
//
// Deprecated: use DBTX.
type Execer = DBTX

// ErrTxFailed is matched by every error of a TxStore call on a caller's
// transaction that is not a business outcome: the transaction may hold
// part of the call, or be over already, and must be rolled back.
var ErrTxFailed = errors.New("sqlstock: the caller's transaction must be rolled back")

// TxError is a failure of a call in the caller's transaction. It matches
// ErrTxFailed; Unwrap gives the failure, which matches stock.ErrContention
// when running the whole transaction again may succeed (a deadlock, a
// serialization failure, a lock wait that ran out, SQLITE_BUSY), and the
// context's error when the context ended.
type TxError struct {
	Op  string // "deduct", "confirm", "revert", "revert items" or "extend hold"
	Err error
}

func (e *TxError) Error() string {
	what := "roll it back"
	if errors.Is(e.Err, stock.ErrContention) {
		what = "roll it back and run it again"
	}
	return "sqlstock: " + e.Op + " in the caller's transaction failed, " + what + ": " + e.Err.Error()
}

// Is reports whether target is ErrTxFailed.
func (e *TxError) Is(target error) bool { return target == ErrTxFailed }

// Unwrap returns the failure.
func (e *TxError) Unwrap() error { return e.Err }

// TxStore runs a Store's Deduct, Confirm, Revert, RevertItems and
// ExtendHold in a transaction the caller opened, so that the caller's own
// rows (the order, an idempotency row) and the stock commit or roll back
// together. Get one from
// Store.InTx; it is cheap, make one per transaction. Calls on one
// transaction must not overlap.
//
// Its calls run their statements on the transaction and never begin,
// commit or roll it back. They bypass group commit and never run again:
// inside someone else's transaction a retry cannot help (after a deadlock
// the transaction is over), so the caller runs the whole transaction
// again. Each call runs in a savepoint of its own (SAVEPOINT, then
// RELEASE SAVEPOINT, or ROLLBACK TO SAVEPOINT first when it is refused),
// which is what keeps a refused call from spoiling the transaction.
//
// Nothing is final until the caller commits, and a rollback leaves
// nothing taken or returned. What a call's answer says:
//
//   - nil: the call's writes are in the transaction.
//   - A business outcome (stock.IsBusiness: sold out, limit reached,
//     unknown SKU or order, conflict, closed, confirmed, expired, a hold
//     too long, a return past the order, invalid): nothing of
//     the call is in the transaction, except that Confirm's
//     stock.ErrHoldExpired keeps the expiry and returns the units, as
//     Store.Confirm does. The transaction is usable on every dialect
//     (PostgreSQL too): go on, commit or roll back.
//   - Anything else: a *TxError matching ErrTxFailed. Roll the
//     transaction back; then nothing of it is applied. When the error also
//     matches stock.ErrContention, run the whole transaction again.
//
// A TxStore never answers stock.ErrUnknownOutcome: only the caller's
// COMMIT can end unknown. Run the whole transaction again with the same
// order IDs to learn what it did: a Deduct of an order whose transaction
// committed answers nil and takes nothing more (the ledger row is the
// idempotency key), of one that rolled back takes its units once, and of
// one whose transaction is still open waits for it to end.
//
// A call decides against the newest committed rows plus the
// transaction's own writes, whatever the transaction read before: the
// stock rows are changed by conditional UPDATEs (WHERE available >= n,
// and the limit and hold time the statement assumed; the settings cache
// only picks what to assume) or read FOR UPDATE, and on MySQL and
// MariaDB, whose REPEATABLE READ snapshot may be older than the call, the
// ledger lines that per-user limits count are read FOR UPDATE too, so the
// limits stay exact. Such a read can deadlock with a Confirm, Revert or
// reclaim of the same user's other order of the SKU (stock.ErrContention).
// On PostgreSQL use READ COMMITTED (the default); under REPEATABLE READ or
// SERIALIZABLE a row changed after the transaction's snapshot fails with a
// serialization failure (stock.ErrContention). On SQLite start the
// transaction with a write, or with BEGIN IMMEDIATE (_txlock=immediate):
// a deferred transaction that read before another writer committed gets
// SQLITE_BUSY at its first write.
//
// A TxStore call that is its Store's first call to reach the database
// (or the first since its stock table was found missing) reads the stock
// table's SKU column's collation on the caller's transaction (on MySQL and
// MariaDB with SELECT VERSION(), which asks the server which it is, see
// Config.Dialect), from the catalog (information_schema, pg_attribute,
// SQLite's pragmas), which takes no lock; if that fails the answer is a
// *TxError.
//
// Lock waits: on MySQL and MariaDB each statement carries Config.LockWait
// as in the Store's own transactions. On PostgreSQL the transaction's own
// lock_timeout applies (a TxStore never changes the caller's settings):
// SET LOCAL lock_timeout after BEGIN. On SQLite the connection's
// busy_timeout applies.
//
// A Pessimistic Store takes the units with its row locks; an Atomic or
// Optimistic one with the Atomic statements (a lost version race could
// only be retried by running the whole transaction again).
type TxStore struct {
	s    *Store
	tx   DBTX
	pool pool // tx, when it is a pool rather than a transaction
}

// InTx returns a TxStore whose calls run in tx: a *sql.Tx, a *sqlx.Tx,
// or a *sql.Conn on which the caller ran BEGIN, on the Store's database
// and tables. A pool (*sql.DB, *sqlx.DB, or any DBTX with their BeginTx
// and Conn methods) is no transaction of the caller's: each call then
// runs in one transaction of its own on it, under the Store's own rules
// (retries, and stock.ErrUnknownOutcome after a COMMIT whose reply was
// lost), without group commit.
//
// A nil tx, typed or not (a nil *sql.Tx), makes every call fail with an
// error wrapping stock.ErrInvalid.
func (s *Store) InTx(tx DBTX) *TxStore {
	if typednil.Is(tx) {
		tx = nil
	}
	t := &TxStore{s: s, tx: tx}
	t.pool, _ = tx.(pool)
	return t
}

// Deduct is Store.Deduct in the caller's transaction: it writes the
// order's ledger lines and takes the units, all or nothing, exactly once
// by order ID. See TxStore for what its answer means.
func (t *TxStore) Deduct(ctx context.Context, o stock.Order) (err error) {
	ctx, tr := t.s.obs.Track(ctx, "sqlstock", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return err
	}
	items := canon.Sorted(o.Items)
	return t.run(ctx, "deduct", func(q querier, undo func() error) (error, error) {
		return nil, t.s.deductIn(ctx, q, undo, o, items)
	})
}

// Confirm is Store.Confirm in the caller's transaction. See TxStore for
// what its answer means.
func (t *TxStore) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := t.s.obs.Track(ctx, "sqlstock", observe.OpConfirm, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return t.run(ctx, "confirm", func(q querier, _ func() error) (error, error) {
		return t.s.settleLines(ctx, q, orderID, t.s.confirmTo)
	})
}

// Revert is Store.Revert in the caller's transaction. See TxStore for
// what its answer means.
func (t *TxStore) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := t.s.obs.Track(ctx, "sqlstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return t.run(ctx, "revert", func(q querier, _ func() error) (error, error) {
		return t.s.settleLines(ctx, q, orderID, t.s.revertTo)
	})
}

// callBody is one call's statements on q. It returns an answer whose
// writes stand, or a failure; a business failure is a refusal, whose
// writes are undone. undo rolls back to the call's savepoint.
type callBody func(q querier, undo func() error) (answer, err error)

// run runs body in a savepoint of the caller's transaction, or for a
// pool in a transaction of its own.
func (t *TxStore) run(ctx context.Context, op string, body callBody) error {
	if t.tx == nil {
		return &stock.InvalidError{Field: "sqlstock.Store.InTx tx", Reason: "nil"}
	}
	// Asked on tx itself: a second connection could wait forever for a
	// pool the caller's transaction holds the last connection of.
	if err := t.s.ready(ctx, t.tx); err != nil {
		if t.pool != nil || stock.IsBusiness(err) {
			return err // a refusal, or a failure before any write
		}
		return txFailed(ctx, op, err) // the transaction may have gone with it

	}
	if t.pool != nil {
		var answer error
		err := t.s.retry(ctx, op, true, func(ctx context.Context) error {
			answer = nil
			return t.s.inTxOn(ctx, t.pool, nil, func(q querier) error {
				var err error
				answer, err = inSavepoint(ctx, q, body)
				return err
			})
		})
		if err != nil {
			return err
		}
		return answer
	}
	if err := ctx.Err(); err != nil {
		return &TxError{Op: op, Err: err}
	}
	answer, err := inSavepoint(ctx, t.tx, body)
	if err != nil {
		return txFailed(ctx, op, err)
	}
	return answer
}

// The savepoint each call runs in. InnoDB, PostgreSQL and SQLite all keep
// a savepoint after ROLLBACK TO, so a call may undo more than once.
const (
	savepointSQL  = "SAVEPOINT stockguard_call"
	rollbackToSQL = "ROLLBACK TO SAVEPOINT stockguard_call"
	releaseSQL    = "RELEASE SAVEPOINT stockguard_call"
)

// inSavepoint runs body between SAVEPOINT and RELEASE SAVEPOINT, rolling
// back to the savepoint first when body refuses; the refusal is then
// the answer. On any other failure it returns at once: the transaction is
// its owner's to roll back.
func inSavepoint(ctx context.Context, q querier, body callBody) (answer, err error) {
	if _, err := q.ExecContext(ctx, savepointSQL); err != nil {
		return nil, err
	}
	undo := func() error {
		_, err := q.ExecContext(ctx, rollbackToSQL)
		return err
	}
	answer, err = body(q, undo)
	switch {
	case err != nil && !stock.IsBusiness(err):
		return nil, err
	case err != nil:
		if uerr := undo(); uerr != nil {
			return nil, uerr
		}
		answer = err
	}
	if _, err := q.ExecContext(ctx, releaseSQL); err != nil {
		return nil, err
	}
	return answer, nil
}

// txFailed wraps a failure in the caller's transaction: a transient one
// (deadlock, serialization failure, lock wait, busy, or a decision that
// needs a newer snapshot) as contention, joined with the context's error
// if it ended.
func txFailed(ctx context.Context, op string, err error) error {
	c := classify(err)
	if errors.Is(err, errRetry) || c == errTransient || c == errLockWait {
		err = &ContentionError{Op: op + " in the caller's transaction", Attempts: 1, Last: err}
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, cerr)
	}
	return &TxError{Op: op, Err: err}
}

// errNotInSnapshot: the ledger refused the order ID, but the
// transaction's snapshot does not show the order (PostgreSQL under
// REPEATABLE READ, after another transaction committed it): a new
// transaction can answer.
var errNotInSnapshot = fmt.Errorf("%w: the order ID is in the ledger but not in the transaction's snapshot", errRetry)

// deductIn deducts o in the transaction q with the Pessimistic
// statements for a Pessimistic Store, the Atomic ones otherwise, and
// answers a repeated order ID from the ledger, read FOR UPDATE.
func (s *Store) deductIn(ctx context.Context, q querier, undo func() error, o stock.Order, items []stock.Item) error {
	var (
		err      error
		inserted bool
	)
	if s.cfg.Strategy == Pessimistic {
		err = s.lockAndTake(ctx, q, s.q.userTotalLocked, o, items, &inserted)
	} else {
		err = s.atomicIn(ctx, q, undo, o, items, &inserted)
	}
	if !errors.Is(err, errOrderExists) && (inserted || !stock.IsBusiness(err) || errors.Is(err, stock.ErrConflict)) {
		return err
	}
	if uerr := undo(); uerr != nil { // PostgreSQL: the refused INSERT ended the savepoint's work
		return uerr
	}
	prev, found, rerr := s.existing(ctx, q, s.q.lockOrder, o, items)
	switch {
	case rerr != nil:
		return rerr
	case found:
		return prev
	case errors.Is(err, errOrderExists):
		return errNotInSnapshot
	}
	return err
}

// atomicIn takes o with the Atomic statements in the transaction q. The
// remembered settings of its SKUs are tried first; when they refuse the
// order, or its UPDATE found other settings in a row, the call is undone
// and tried once more with the rows' settings read FOR UPDATE, which hold
// until the transaction ends. Without remembered settings the rows are
// read so at once.
func (s *Store) atomicIn(ctx context.Context, q querier, undo func() error, o stock.Order, items []stock.Item, inserted *bool) error {
	set, fresh := s.remembered(items), false
	if set == nil {
		var err error
		if set, err = s.lockSettings(ctx, q, items); err != nil {
			return err
		}
		fresh = true
	}
	for {
		*inserted = false
		err := needUser(o, items, set)
		if err == nil {
			var failed int
			failed, err = s.takeLines(ctx, q, s.q.userTotalLocked, o, items, set, s.nowMS(), inserted)
			if failed >= 0 && errors.Is(err, errRetry) {
				err = s.whyNotTaken(ctx, q, s.q.levelsLocked, items[failed], set[failed], true)
			}
			if !errors.Is(err, errRetry) {
				return err
			}
		}
		if fresh {
			return err // decided by the locked rows' own settings
		}
		if err := undo(); err != nil {
			return err
		}
		if set, err = s.lockSettings(ctx, q, items); err != nil {
			return err
		}
		fresh = true
	}
}

// lockSettings reads the settings of the sorted items from their rows,
// locked FOR UPDATE in SKU order, or fails with stock.ErrUnknownSKU
// naming the first SKU without a row.
func (s *Store) lockSettings(ctx context.Context, q querier, items []stock.Item) ([]settings, error) {
	rows, err := s.lockItems(ctx, q, items)
	if err != nil {
		return nil, err
	}
	return settingsOfRows(rows), nil
}
