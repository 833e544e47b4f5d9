package sqlstock

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.HoldExtender = (*Store)(nil)

// ExtendHold implements stock.HoldExtender. It is one conditional UPDATE
// of the order's ledger lines, which moves their deadline (the column the
// reclaimer and HeldBefore read through the (state, deadline_ms) index)
// only if the order is held, its deadline has not passed, the new
// deadline is later than the current one and no later than the order's
// bound, kept with the order since its Deduct. When it changes nothing,
// a read of the order tells why, in the reference's order:
// stock.ErrUnknownOrder, stock.ErrOrderConfirmed, stock.ErrOrderClosed,
// stock.ErrHoldExpired, nil for a deadline at or before the current one,
// stock.ErrHoldTooLong. An order placed by an earlier version of this
// package, which kept no bound, cannot be extended (stock.ErrHoldTooLong).
// A reply lost after the UPDATE was sent is run again: the order then
// has the deadline, and the answer is nil. The UPDATE waits at most
// Config.LockWait for the lines' row locks (held by a Confirm or a
// caller's transaction, say): on MySQL and MariaDB past it the answer is
// stock.ErrContention, on PostgreSQL, where the statement is canceled,
// stock.ErrUnknownOutcome (call again); a call that got no connection
// within it sent nothing and answers stock.ErrContention. An autocommit
// UPDATE the call's own bound cuts before the server answers (on MySQL
// and MariaDB too, on a machine too busy for the server's lock timeout to
// reach the client in time) may have applied: stock.ErrUnknownOutcome. On SQLite the UPDATE and the read
// run in one IMMEDIATE transaction, which waits for the write lock as
// every write of the Store does.
func (s *Store) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpExtendHold, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	to := canon.Millis(deadline)
	return s.retry(ctx, "extend hold", true, func(ctx context.Context) error { return s.extendOnce(ctx, orderID, to) })
}

// extendOnce is one attempt of ExtendHold.
func (s *Store) extendOnce(ctx context.Context, orderID string, to int64) error {
	switch s.d {
	case SQLite:
		// In the one writer's IMMEDIATE transaction, which waits for the
		// write lock up to Config.LockWait (busy_timeout).
		return s.inTx(ctx, func(q querier) error { return s.extendIn(ctx, q, s.q.readOrder, orderID, to) })
	case Postgres:
		// An autocommit statement cannot carry lock_timeout: its wait for
		// a connection and for the lines' row locks is bounded by
		// Config.LockWait through its context, as the one-statement
		// deduct's is (see takeOnePG).
		var n int64
		timedOut, err := s.withinLockWait(ctx, func(ctx context.Context) (err error) {
			n, err = s.execWrite(ctx, s.q.extend, to, orderID, s.nowMS(), to, to)
			return err
		})
		switch {
		case timedOut:
			return cutAtLockWait("extend hold", err)
		case err != nil || n > 0:
			return err
		}
		return s.whyNotExtended(ctx, s.db, s.q.readOrder, orderID, to)
	}
	n, err := s.execWrite(ctx, s.q.extend, to, orderID, s.nowMS(), to, to)
	if err != nil || n > 0 {
		return err
	}
	return s.whyNotExtended(ctx, s.db, s.q.readOrder, orderID, to)
}

// extendIn is the extension of orderID to deadline to (Unix ms) in a
// transaction q: the UPDATE, then, if it changed nothing, why not, from
// the lines read with query (readOrder, or lockOrder in a caller's
// transaction).
func (s *Store) extendIn(ctx context.Context, q querier, query, orderID string, to int64) error {
	n, err := affected(q.ExecContext(ctx, s.q.extend, to, orderID, s.nowMS(), to, to))
	if err != nil || n > 0 {
		return err
	}
	return s.whyNotExtended(ctx, q, query, orderID, to)
}

// whyNotExtended answers an extension of orderID to deadline to (Unix ms)
// whose UPDATE changed nothing, from the order's lines read through q
// with query (readOrder, or lockOrder in a caller's transaction).
func (s *Store) whyNotExtended(ctx context.Context, q querier, query, orderID string, to int64) error {
	lines, err := s.readOrder(ctx, q, query, orderID)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return &orderError{ID: orderID, Err: stock.ErrUnknownOrder}
	}
	l := lines[0] // the lines share state, deadline and bound
	bound := l.bound
	if bound == 0 {
		bound = l.deadline // placed before bounds were kept
	}
	switch {
	case l.state == stateConfirmed:
		return &orderError{ID: orderID, Err: stock.ErrOrderConfirmed}
	case l.state == stateReverted, l.state == stateRefunded:
		return &orderError{ID: orderID, Err: stock.ErrOrderClosed}
	case l.state == stateExpired, l.deadline <= s.nowMS():
		return &orderError{ID: orderID, Err: stock.ErrHoldExpired}
	case to <= l.deadline:
		return nil
	case to > bound:
		return &orderError{ID: orderID, Err: stock.ErrHoldTooLong}
	}
	return errRetry // held, live and extendable: it changed between the UPDATE and the read
}

// ExtendHold is Store.ExtendHold in the caller's transaction: the new
// deadline is part of the transaction, and holds once the caller commits
// (until then the reclaimer, waiting on the lines' row locks, cannot
// return the order either way). See TxStore for what its answer means.
func (t *TxStore) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := t.s.obs.Track(ctx, "sqlstock", observe.OpExtendHold, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	to := canon.Millis(deadline)
	s := t.s
	return t.run(ctx, "extend hold", func(q querier, _ func() error) (error, error) {
		return nil, s.extendIn(ctx, q, s.q.lockOrder, orderID, to)
	})
}
