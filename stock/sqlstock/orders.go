package sqlstock

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Confirm implements stock.Manager. In one transaction it locks the
// order's ledger lines, moves them from held to confirmed and the units
// from held to sold (what partial reverts left of them); past the deadline it moves them to expired and
// returns the units instead, and reports stock.ErrHoldExpired.
func (s *Store) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpConfirm, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return s.settle(ctx, "confirm", orderID, s.confirmTo)
}

// confirmTo decides a Confirm of an order in state: the state it moves
// to (0 for none), the statement that moves its units, and its answer.
func (s *Store) confirmTo(state int64, pastDeadline bool) (to int64, move string, answer error) {
	switch {
	case state == stateConfirmed:
		return 0, "", nil
	case state == stateExpired:
		return 0, "", stock.ErrHoldExpired
	case state != stateHeld:
		return 0, "", stock.ErrOrderClosed
	case pastDeadline:
		return stateExpired, s.q.release, stock.ErrHoldExpired
	}
	return stateConfirmed, s.q.confirm, nil
}

// Revert implements stock.Manager. In one transaction it locks the
// order's ledger lines and moves them from held to reverted (or from
// confirmed to refunded), returning the units (what partial reverts left
// of them); the per-user quota comes
// back with them, since it is counted from held and confirmed lines.
func (s *Store) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	return s.settle(ctx, "revert", orderID, s.revertTo)
}

// revertTo decides a Revert of an order in state, as confirmTo does. A
// held order past its deadline is expired, reclaimed or not: it ends
// expired, as its reclaimer ends it.
func (s *Store) revertTo(state int64, pastDeadline bool) (to int64, move string, answer error) {
	switch {
	case state == stateHeld && pastDeadline:
		return stateExpired, s.q.release, nil
	case state == stateHeld:
		return stateReverted, s.q.release, nil
	case state == stateConfirmed:
		return stateRefunded, s.q.refund, nil
	}
	return 0, "", nil // reverted, refunded or expired: already returned
}

var _ stock.HoldReverter = (*Store)(nil)

// RevertHeld implements stock.HoldReverter: a held order's units go back
// and it ends expired, as its reclaimer ends it, decided under the same
// lock, so a confirmed sale is never refunded.
func (s *Store) RevertHeld(ctx context.Context, orderID string) (found stock.State, err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return stock.StateUnknown, err
	}
	err = s.settle(ctx, "revert held", orderID, func(state int64, _ bool) (int64, string, error) {
		found = ledgerState(state)
		if state == stateHeld {
			return stateExpired, s.q.release, nil
		}
		return 0, "", nil
	})
	switch {
	case errors.Is(err, stock.ErrUnknownOrder):
		return stock.StateUnknown, nil
	case err != nil:
		return stock.StateUnknown, err
	}
	return found, nil
}

// settle runs one state transition of an order: lock its lines, decide,
// update the lines only if their state is still the one read (RowsAffected
// decides), then move the units, SKUs in sorted order. The answer is
// returned after COMMIT, so a transition that reports an error (a late
// Confirm) still happens. A COMMIT whose outcome is unknown is run again:
// the lines' state tells whether it applied.
func (s *Store) settle(ctx context.Context, op, orderID string,
	decide func(state int64, pastDeadline bool) (to int64, move string, answer error)) error {
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	var answer error
	err := s.retry(ctx, op, true, func(ctx context.Context) error {
		answer = nil
		return s.inTx(ctx, func(q querier) error {
			var err error
			answer, err = s.settleLines(ctx, q, orderID, decide)
			return err
		})
	})
	if err != nil {
		return err
	}
	return answer
}

// settleLines is settle's statements on q. The answer (nil, or a
// business outcome) comes with the writes made, which stand.
func (s *Store) settleLines(ctx context.Context, q querier, orderID string,
	decide func(state int64, pastDeadline bool) (to int64, move string, answer error)) (answer, err error) {
	lines, err := s.readOrder(ctx, q, s.q.lockOrder, orderID)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return &orderError{ID: orderID, Err: stock.ErrUnknownOrder}, nil
	}
	from := lines[0].state
	to, move, ans := decide(from, lines[0].deadline <= s.nowMS())
	if ans != nil {
		answer = &orderError{ID: orderID, Err: ans}
	}
	if to == 0 {
		return answer, nil
	}
	n, err := affected(q.ExecContext(ctx, s.q.setState, to, orderID, from))
	if err != nil {
		return nil, err
	}
	if n != int64(len(lines)) {
		return nil, errRetry // changed since read: cannot happen under the lock, but never move units twice
	}
	for _, l := range lines { // line order is sorted SKU order
		n := l.left() // partial reverts returned the rest
		if n == 0 {
			continue
		}
		if _, err := q.ExecContext(ctx, move, n, n, l.sku); err != nil {
			return nil, err
		}
	}
	return answer, nil
}
