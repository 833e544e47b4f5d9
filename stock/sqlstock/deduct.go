package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Deduct implements stock.Manager with the Store's strategy. Every
// strategy writes the order's ledger lines and takes the units in one
// transaction, locking stock rows in sorted SKU order; a duplicate order ID
// is caught by the ledger's primary key, so a retried Deduct never takes
// twice. Transient failures are retried (Config.MaxAttempts) and then
// reported as stock.ErrContention, never as sold out. A write whose
// outcome is unknown is run again to learn it from the ledger; if that
// fails too the error matches stock.ErrUnknownOutcome.
func (s *Store) Deduct(ctx context.Context, o stock.Order) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	items := canon.Sorted(o.Items)
	if s.group != nil {
		return s.group.do(ctx, o, items)
	}
	return s.deductOne(ctx, o, items)
}

// deductOne deducts the order in a transaction of its own.
func (s *Store) deductOne(ctx context.Context, o stock.Order, items []stock.Item) error {
	return s.retry(ctx, "deduct", true, func(ctx context.Context) error { return s.attemptOne(ctx, o, items) })
}

// attemptOne is one attempt of deductOne.
func (s *Store) attemptOne(ctx context.Context, o stock.Order, items []stock.Item) error {
	var (
		err      error
		inserted bool // this attempt's ledger INSERT went through
	)
	switch s.cfg.Strategy {
	case Optimistic:
		err = s.deductOptimistic(ctx, o, items, &inserted)
	case Pessimistic:
		err = s.deductPessimistic(ctx, o, items, &inserted)
	default:
		err = s.deductAtomic(ctx, o, items, &inserted)
	}
	return s.answer(ctx, o, items, err, inserted)
}

// answer turns an attempt's refusal into the ledger's answer when the
// order ID is already there: a repeated call answers from the ledger,
// whatever the stock says now. (After an INSERT of the order went
// through, it was not.)
func (s *Store) answer(ctx context.Context, o stock.Order, items []stock.Item, err error, inserted bool) error {
	if errors.Is(err, errOrderExists) || (!inserted && stock.IsBusiness(err) && !errors.Is(err, stock.ErrConflict)) {
		if prev, found, rerr := s.existing(ctx, s.db, s.q.readOrder, o, items); rerr != nil {
			return rerr
		} else if found {
			return prev
		} else if errors.Is(err, errOrderExists) {
			return errRetry // the row went away again (cannot happen: ledger rows are never deleted)
		}
	}
	return err
}

// errOrderExists: the ledger's primary key refused the order's first line.
var errOrderExists = errors.New("sqlstock: order ID already in the ledger")

// errSettingsChanged: a SKU's limit or hold time is not the one the
// statement that checked it was given. Another attempt reads them anew.
var errSettingsChanged = fmt.Errorf("%w: settings changed", errRetry)

// deductAtomic takes the order with the remembered settings of its SKUs.
// A remembered setting never refuses an order on its own: an order refused
// by one (a user-less order of a SKU remembered with a per-user limit) or
// whose statement found other settings in the row is tried once more
// with settings read from the database.
func (s *Store) deductAtomic(ctx context.Context, o stock.Order, items []stock.Item, inserted *bool) error {
	set, fresh, err := s.settingsOf(ctx, items)
	if err != nil {
		return err
	}
	for {
		*inserted = false
		err := needUser(o, items, set)
		if err == nil {
			err = s.takeAtomic(ctx, o, items, set, inserted)
			if !errors.Is(err, errSettingsChanged) {
				return err
			}
		}
		if fresh {
			return err // refused (or changed again) with the row's own settings
		}
		if set, err = s.readSettings(ctx, items); err != nil {
			return err
		}
		fresh = true
	}
}

// takeAtomic writes the ledger lines, then takes each line with a
// conditional UPDATE that also checks the SKU's limit and hold time are
// set's. The stock row is locked only from that UPDATE to COMMIT.
func (s *Store) takeAtomic(ctx context.Context, o stock.Order, items []stock.Item, set []settings, inserted *bool) error {
	now := s.nowMS()
	if s.d == Postgres && len(items) == 1 && set[0].limit == 0 && o.HoldTTL == 0 {
		busy := s.inFlight.enter(items[0].SKU)
		defer s.inFlight.leave(items[0].SKU)
		if !busy {
			return s.takeOnePG(ctx, o, items[0], now)
		}
	}
	failed := -1
	err := s.inTxRows(ctx, skuList(items), func(q querier) error {
		var err error
		failed, err = s.takeLines(ctx, q, s.q.userTotal, o, items, set, now, inserted)
		return err
	})
	if failed >= 0 && errors.Is(err, errRetry) {
		return s.whyNotTaken(ctx, s.db, s.q.levels, items[failed], set[failed], true)
	}
	return err
}

// takeLines is the Atomic strategy's statements on q: the ledger lines,
// one conditional UPDATE per line, then the per-user limits (counted with
// userTotal), then the order's own hold time. A line whose UPDATE changed
// nothing fails with errRetry and its index as failed (else -1).
func (s *Store) takeLines(ctx context.Context, q querier, userTotal string, o stock.Order, items []stock.Item,
	set []settings, now int64, inserted *bool) (failed int, err error) {
	h := holdOf(o, items, set, now)
	if err := s.insertLines(ctx, q, inserted, o, items, h, now); err != nil {
		return -1, err
	}
	for i, it := range items {
		n, err := affected(q.ExecContext(ctx, s.later(q, i, s.q.take), it.Qty, it.Qty, it.SKU, it.Qty, set[i].limit, set[i].ttlMS, set[i].maxMS))
		if err != nil {
			return -1, err
		}
		if n == 0 {
			return i, errRetry
		}
	}
	if err := s.checkLimits(ctx, q, userTotal, o, items, set); err != nil {
		return -1, err
	}
	return -1, h.err
}

// takeOnePG deducts a one-line order of a SKU without a per-user limit in
// one autocommit statement: UPDATE ... RETURNING feeds the ledger INSERT,
// one round trip in all. The row stays locked while the ledger row is
// written, longer than in the transaction (which writes it first), so it
// is used only when no other deduct of the SKU is in flight in this Store:
// on a hot SKU the transaction goes faster.
//
// An autocommit statement cannot carry lock_timeout, so its wait for a
// connection and for the row lock is bounded by Config.LockWait (or the
// attempt's budget, if sooner: bodyBy) through its context. A statement
// canceled then may have applied: the answer is stock.ErrUnknownOutcome
// (the retry tells), never a wait as long as the caller's. One that was
// never sent (no connection came) or that the server answered applied
// nothing: it is a lock wait (bodyLockWait), run again while the call has
// time and then stock.ErrContention.
func (s *Store) takeOnePG(parent context.Context, o stock.Order, it stock.Item, now int64) error {
	ctx, cancel := context.WithDeadline(parent, s.bodyBy(parent))
	defer cancel()
	n, err := s.execWrite(ctx, s.q.takeOnePG,
		it.Qty, it.Qty, it.SKU, it.Qty, o.ID, it.SKU, it.Qty, o.UserID, now, now, now)
	switch {
	case err != nil && classify(err) == errDuplicate:
		return errOrderExists
	case err != nil && ctx.Err() != nil && parent.Err() == nil:
		return cutAtLockWait("deduct", err)
	case err != nil:
		return err
	case n == 1:
		return nil
	}
	return s.whyNotTaken(ctx, s.db, s.q.levels, it, settings{limit: 0}, false)
}

// whyNotTaken tells why a conditional UPDATE of it's row changed nothing:
// the SKU is gone, its settings changed (errSettingsChanged), or it has
// too few units. The UPDATE checked the limit it used, and the hold time
// too if checkedTTL. The row is read through q with levels (or
// levelsLocked).
func (s *Store) whyNotTaken(ctx context.Context, q querier, levels string, it stock.Item, used settings, checkedTTL bool) error {
	var (
		avail int64
		now   settings
	)
	err := q.QueryRowContext(ctx, levels, it.SKU).Scan(&avail, new(int64), new(int64), &now.limit, &now.ttlMS, &now.maxMS)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		s.settings.Remove(it.SKU)
		return &stock.SKUError{SKU: it.SKU, Err: stock.ErrUnknownSKU}
	case err != nil:
		return err
	}
	s.settings.Add(it.SKU, now)
	switch {
	case now.limit != used.limit || (checkedTTL && (now.ttlMS != used.ttlMS || now.maxMS != used.maxMS)):
		return errSettingsChanged
	case avail < it.Qty:
		return &stock.SKUError{SKU: it.SKU, Err: stock.ErrSoldOut}
	}
	return errRetry // units came back between the two statements
}

// deductOptimistic reads the rows, then writes each back only if its
// version is unchanged. On SQLite the read runs inside the IMMEDIATE
// transaction, where no other writer can change the row, so the version
// check never fails there.
func (s *Store) deductOptimistic(ctx context.Context, o stock.Order, items []stock.Item, inserted *bool) error {
	var rows []stockRow
	read := func(q querier) error {
		var err error
		if rows, err = s.readRows(ctx, q, items); err != nil {
			return err
		}
		return checkRows(o, items, rows)
	}
	if s.d != SQLite {
		if err := read(s.db); err != nil {
			return err
		}
	}
	return s.inTxRows(ctx, skuList(items), func(q querier) error {
		if s.d == SQLite {
			if err := read(q); err != nil {
				return err
			}
		}
		now := s.nowMS()
		set := settingsOfRows(rows)
		h := holdOf(o, items, set, now)
		if err := s.insertLines(ctx, q, inserted, o, items, h, now); err != nil {
			return err
		}
		for i, it := range items {
			n, err := affected(q.ExecContext(ctx, s.later(q, i, s.q.takeIfVersion), it.Qty, it.Qty, it.SKU, rows[i].version))
			if err != nil {
				return err
			}
			if n == 0 {
				return errRetry
			}
		}
		if err := s.checkLimits(ctx, q, s.q.userTotal, o, items, set); err != nil {
			return err
		}
		return h.err
	})
}

// deductPessimistic locks the rows in sorted SKU order with a bounded
// wait, checks them, then writes the ledger and the rows.
func (s *Store) deductPessimistic(ctx context.Context, o stock.Order, items []stock.Item, inserted *bool) error {
	return s.inTxRows(ctx, skuList(items), func(q querier) error {
		return s.lockAndTake(ctx, q, s.q.userTotal, o, items, inserted)
	})
}

// lockAndTake is the Pessimistic strategy's statements on q; per-user
// limits are counted with userTotal.
func (s *Store) lockAndTake(ctx context.Context, q querier, userTotal string, o stock.Order, items []stock.Item, inserted *bool) error {
	rows, err := s.lockItems(ctx, q, items)
	if err != nil {
		return err
	}
	if err := checkRows(o, items, rows); err != nil {
		return err
	}
	now := s.nowMS()
	set := settingsOfRows(rows)
	h := holdOf(o, items, set, now)
	if err := s.insertLines(ctx, q, inserted, o, items, h, now); err != nil {
		return err
	}
	if err := s.checkLimits(ctx, q, userTotal, o, items, set); err != nil {
		return err
	}
	if h.err != nil {
		return h.err
	}
	for _, it := range items {
		if _, err := q.ExecContext(ctx, s.q.takeLocked, it.Qty, it.Qty, it.SKU); err != nil {
			return err
		}
	}
	return nil
}

// insertLines writes the order's held lines, with h's deadline and
// bound, in one statement; a duplicate order ID comes back as
// errOrderExists.
func (s *Store) insertLines(ctx context.Context, q querier, inserted *bool, o stock.Order, items []stock.Item, h hold, now int64) error {
	args := make([]any, 0, lineParams*len(items))
	for i, it := range items {
		args = append(args, o.ID, i, it.SKU, it.Qty, o.UserID, h.deadline, h.bound, now)
	}
	_, err := q.ExecContext(ctx, s.q.insertLedger(len(items)), args...)
	if err != nil && classify(err) == errDuplicate {
		return errOrderExists
	}
	*inserted = err == nil
	return err
}

// checkLimits counts, for every line of a SKU with a per-user limit, what
// the user holds or bought including this order, with userTotal (or
// userTotalLocked). It runs after the stock row is locked, so concurrent
// orders of one user are counted one after the other.
func (s *Store) checkLimits(ctx context.Context, q querier, userTotal string, o stock.Order, items []stock.Item, set []settings) error {
	for i, it := range items {
		if set[i].limit == 0 {
			continue
		}
		var total int64
		if err := q.QueryRowContext(ctx, userTotal, it.SKU, o.UserID).Scan(&total); err != nil {
			return err
		}
		if total > set[i].limit {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrLimitReached}
		}
	}
	return nil
}

// needUser refuses an order without a user that names a SKU with a
// per-user limit.
func needUser(o stock.Order, items []stock.Item, set []settings) error {
	if o.UserID != "" {
		return nil
	}
	for i, it := range items {
		if set[i].limit > 0 {
			return &stock.InvalidError{Field: "order.UserID", Reason: "SKU " + quoteName(it.SKU) + " has a per-user limit"}
		}
	}
	return nil
}

// hold is an order's deadline and the bound of its deadline, in Unix
// milliseconds, as its Deduct at now sets them.
type hold struct {
	deadline, bound int64
	// err refuses an own hold time (stock.Order.HoldTTL) past the
	// shortest maximum of the order's SKUs: a *stock.SKUError naming that
	// SKU's line, matching stock.ErrHoldTooLong; nil if none. Deducts
	// return it after the stock and limit checks, as the reference does.
	err error
}

// holdOf returns the hold of order o (whose sorted items have the
// settings set) deducted at now: deadline now plus o.HoldTTL, or plus the
// shortest hold time of its SKUs, and bound now plus the shortest
// effective maximum (canon.Hold).
func holdOf(o stock.Order, items []stock.Item, set []settings, now int64) hold {
	holds, maxes := make([]time.Duration, len(set)), make([]time.Duration, len(set))
	for i, v := range set {
		holds[i], maxes[i] = ms(v.ttlMS), ms(v.effectiveMax())
	}
	ttl, bound, bad := canon.Hold(o.HoldTTL, holds, maxes)
	h := hold{deadline: now + ttl.Milliseconds(), bound: now + bound.Milliseconds()}
	if bad >= 0 {
		h.err = &stock.SKUError{SKU: items[bad].SKU, Err: stock.ErrHoldTooLong}
	}
	return h
}

// ms is n milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
