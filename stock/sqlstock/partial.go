package sqlstock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.PartialReverter = (*Store)(nil)

// RevertItems implements stock.PartialReverter. In one transaction it
// locks the order's ledger lines, looks the operation up in the returns
// table (see Schema), checks the order and every line of r, adds the
// units to the lines' returned counts with conditional UPDATEs (never past
// what a line took), moves them back to available (from held, or from sold
// for a confirmed order), records the operation ID with the return's
// canonical items, and, once nothing is left on any line, moves the order
// to reverted (or refunded). The per-user quota comes back with the
// units, since it is counted from what the held and confirmed lines still
// take. All of r or nothing.
//
// Refusals are checked in the reference's order: stock.ErrUnknownOrder,
// then a repeat of r.OpID (nil for the same items, stock.ErrConflict for
// others), then stock.ErrHoldExpired, stock.ErrOrderClosed, and
// stock.ErrExceedsOrder as a *stock.SKUError naming the first line (in
// SKU order) that asks more than its order line still has. Transient
// failures are retried and reported as stock.ErrContention; a COMMIT whose
// outcome is unknown is run again, and the returns table answers (nil
// once it applied). Operation IDs are kept for as long as the returns
// table keeps their rows.
func (s *Store) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpRevertItems, len(r.Items))
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	items := canon.Sorted(r.Items)
	sig := canon.Signature(items)
	return s.retry(ctx, "revert items", true, func(ctx context.Context) error {
		return s.inTx(ctx, func(q querier) error {
			return s.returnLines(ctx, q, r, items, sig)
		})
	})
}

// returnLines is RevertItems' statements on q for r, whose items are
// sorted with signature sig. A refusal (a business error) comes before
// any write.
func (s *Store) returnLines(ctx context.Context, q querier, r stock.Return, items []stock.Item, sig string) error {
	lines, err := s.readOrder(ctx, q, s.q.lockOrder, r.OrderID)
	if err != nil {
		return err
	}
	if len(lines) == 0 {
		return &orderError{ID: r.OrderID, Err: stock.ErrUnknownOrder}
	}
	if answer, found, err := s.appliedReturn(ctx, q, s.q.readReturn, r, sig); err != nil {
		return err
	} else if found {
		return answer
	}
	// refuse answers a refusal unless the return applied after all: on
	// MySQL and MariaDB the plain read above sees the snapshot of a
	// caller's transaction, which may have been taken before the same
	// return committed elsewhere (whose lines the lock read as they are
	// now); a locking read sees the newest row. It is needed only where
	// the lines show returns, so an order without any takes no lock on
	// the returns table.
	refuse := func(refusal error) error {
		if !s.d.mysqlLike() || !anyReturned(lines) {
			return refusal
		}
		switch answer, found, err := s.appliedReturn(ctx, q, s.q.lockReturn, r, sig); {
		case err != nil:
			return err
		case found:
			return answer
		}
		return refusal
	}
	st := lines[0].state
	switch {
	case st == stateExpired, st == stateHeld && lines[0].deadline <= s.nowMS():
		return refuse(&orderError{ID: r.OrderID, Err: stock.ErrHoldExpired})
	case st != stateHeld && st != stateConfirmed:
		return refuse(&orderError{ID: r.OrderID, Err: stock.ErrOrderClosed})
	}
	at := make([]int, len(items)) // the line of each item
	for i, it := range items {
		at[i] = -1
		for j, l := range lines {
			if l.sku == it.SKU {
				at[i] = j
			}
		}
		if at[i] < 0 || it.Qty > lines[at[i]].left() {
			return refuse(&stock.SKUError{SKU: it.SKU, Err: stock.ErrExceedsOrder})
		}
	}
	move := s.q.release
	if st == stateConfirmed {
		move = s.q.refund
	}
	for i, it := range items { // SKU order, as every transaction locks stock rows
		l := &lines[at[i]]
		n, err := affected(q.ExecContext(ctx, s.q.returnLine, it.Qty, r.OrderID, l.line, st, it.Qty))
		if err != nil {
			return err
		}
		if n != 1 {
			return errRetry // changed since read: cannot happen under the lock, but never return units twice
		}
		l.returned += it.Qty
		if _, err := q.ExecContext(ctx, move, it.Qty, it.Qty, it.SKU); err != nil {
			return err
		}
	}
	if allReturned(lines) {
		to := int64(stateReverted)
		if st == stateConfirmed {
			to = stateRefunded
		}
		n, err := affected(q.ExecContext(ctx, s.q.setState, to, r.OrderID, st))
		if err != nil {
			return err
		}
		if n != int64(len(lines)) {
			return errRetry // as above
		}
	}
	if _, err := q.ExecContext(ctx, s.q.insertReturn, r.OrderID, r.OpID, sig, s.nowMS()); err != nil {
		if classify(err) == errDuplicate {
			return errRetry // applied meanwhile (cannot happen under the lock): the next attempt answers
		}
		return err
	}
	return nil
}

// appliedReturn looks r up in the returns table through q with query
// (readReturn, or lockReturn): found reports whether it is there, with
// its answer: nil for the same items (signature sig), stock.ErrConflict
// for others.
func (s *Store) appliedReturn(ctx context.Context, q querier, query string, r stock.Return, sig string) (answer error, found bool, err error) {
	var prev string
	switch err := q.QueryRowContext(ctx, query, r.OrderID, r.OpID).Scan(&prev); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case prev == sig:
		return nil, true, nil // applied already
	}
	return &returnError{OrderID: r.OrderID, OpID: r.OpID, Err: stock.ErrConflict}, true, nil
}

// anyReturned reports whether partial reverts gave back a unit of the
// order's lines.
func anyReturned(lines []ledgerLine) bool {
	for _, l := range lines {
		if l.returned > 0 {
			return true
		}
	}
	return false
}

// allReturned reports whether partial reverts gave back every unit of
// the order's lines.
func allReturned(lines []ledgerLine) bool {
	for _, l := range lines {
		if l.left() > 0 {
			return false
		}
	}
	return true
}

// returnError names the partial revert a business outcome applies to.
type returnError struct {
	OrderID, OpID string
	Err           error
}

func (e *returnError) Error() string {
	return e.Err.Error() + ": return " + quoteName(e.OpID) + " of order " + quoteName(e.OrderID)
}
func (e *returnError) Unwrap() error { return e.Err }

// RevertItems is Store.RevertItems in the caller's transaction: the
// return is part of the transaction, and is applied once the caller
// commits. See TxStore for what its answer means. On MySQL and MariaDB a
// return of the same operation committed after the transaction's snapshot
// was taken is never refused for what it returned (a locking read of the
// returns table answers nil), but where its lines still have units it can
// fail the call with stock.ErrContention (a *TxError): run the whole
// transaction again, and it answers nil.
func (t *TxStore) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := t.s.obs.Track(ctx, "sqlstock", observe.OpRevertItems, len(r.Items))
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	items := canon.Sorted(r.Items)
	sig := canon.Signature(items)
	return t.run(ctx, "revert items", func(q querier, _ func() error) (error, error) {
		return nil, t.s.returnLines(ctx, q, r, items, sig)
	})
}
