package sqlstock

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/stock"
)

// A call's time is bounded by Config.LockWait, whatever the database does
// (see AnswerBound): attempts that applied nothing (lock waits, deadlocks,
// serialization failures, each attempt's lock waits within LockWait) are
// run again until two LockWaits from the call's start, and the re-runs
// that learn an unknown outcome until three.
const (
	settledWaits = 2 // LockWaits within which a call that applied nothing answers
	answerWaits  = 3 // LockWaits within which every call answers
)

// AnswerBound is how long after it starts any call of the Store answers,
// plus the round trips of its last statements: three Config.LockWaits.
// A call that applied nothing (its lock waits and deadlocks retried, a
// grouped Deduct's wait for the groups ahead of it included) answers
// within two, with stock.ErrContention if no attempt got its locks by
// then, except a grouped Deduct whose group began to write just before
// its two were up, which waits for that group's transaction (one
// LockWait at most); a call whose write may have applied has one LockWait more to
// learn its outcome by running again, and answers
// stock.ErrUnknownOutcome past it. A caller's context that ends first
// ends the call first.
//
// MySQL and MariaDB take LockWait in whole seconds (rounded up), and so
// does the bound there.
func (s *Store) AnswerBound() time.Duration { return answerWaits * s.lockWait() }

// lockWait is Config.LockWait as the server applies it: MySQL and MariaDB
// take whole seconds, rounded up. Before the Store knows its server
// (detect publishes s.d with its verdict), a zero Config.Dialect may be
// either: rounded up, the longer.
func (s *Store) lockWait() time.Duration {
	d := s.cfg.Dialect
	if s.known.Load() != nil {
		d = s.d
	}
	if d == 0 || d.mysqlLike() {
		return (s.cfg.LockWait + time.Second - 1) / time.Second * time.Second
	}
	return s.cfg.LockWait
}

// budgetKey is the context key of an attempt's budget: the time its
// transaction's statements must end by (see inTxOn).
type budgetKey struct{}

// attemptCtx is the context of an attempt of a call that started at
// start: it ends at the call's answer bound, and its transaction's
// statements end by the bound of calls that applied nothing, or by the
// answer bound once the outcome is unknown.
func (s *Store) attemptCtx(ctx context.Context, start time.Time, unknown bool) (context.Context, context.CancelFunc) {
	body := start.Add(settledWaits * s.lockWait())
	if unknown {
		body = start.Add(answerWaits * s.lockWait())
	}
	ctx = context.WithValue(ctx, budgetKey{}, body)
	return context.WithDeadline(ctx, start.Add(answerWaits*s.lockWait()))
}

// bodyBy returns when a transaction begun now on ctx must end its
// statements: Config.LockWait after now, or the attempt's budget if that
// comes first.
func (s *Store) bodyBy(ctx context.Context) time.Time {
	by := time.Now().Add(s.lockWait() + bodySlack)
	if b, ok := ctx.Value(budgetKey{}).(time.Time); ok && b.Before(by) {
		by = b
	}
	return by
}

// withinLockWait runs fn, which writes nothing or only in autocommit
// statements, on ctx bounded by bodyBy(ctx): its wait for a pool
// connection and for the server ends within one Config.LockWait (or the
// attempt's budget), not the caller's context. cut reports that this
// bound, not ctx, ended fn with err.
func (s *Store) withinLockWait(ctx context.Context, fn func(context.Context) error) (cut bool, err error) {
	bounded, cancel := context.WithDeadline(ctx, s.bodyBy(ctx))
	defer cancel()
	err = fn(bounded)
	return err != nil && bounded.Err() != nil && ctx.Err() == nil, err
}

// read runs fn, a read of op that writes nothing, within one
// Config.LockWait (withinLockWait): one that ran out of it, waiting for a
// pool connection or the server, fails with *ContentionError (nothing
// was applied), as a write that waited as long would.
func (s *Store) read(ctx context.Context, op string, fn func(context.Context) error) error {
	cut, err := s.withinLockWait(ctx, fn)
	if cut {
		return &ContentionError{Op: op, Attempts: 1, Last: err}
	}
	return err
}

// retry runs one call's attempt fn until it gives an answer, and returns
// that answer classified by the one rule of outcomes. Each attempt gets
// its own context (attemptCtx) bounded by the call's time:
//
//   - A context already done returns its error before fn is run: nothing
//     was sent.
//   - Transient failures (deadlock, lock wait timeout, serialization
//     failure, SQLITE_BUSY, errRetry, a pooled connection found dead) are
//     run again with jittered exponential backoff, up to MaxAttempts and
//     while the call is within two LockWaits of its start; then the call
//     fails with *ContentionError: nothing was applied.
//   - Once an attempt may have applied its writes (*maybeApplied), the
//     call's outcome is unknown. If rerun, fn is run again to learn it
//     (every such call is idempotent by order or operation ID, so the
//     ledger answers), up to MaxAttempts and within three LockWaits of the
//     start; only a success or a business answer ends the unknown, and
//     every other failure, the re-run's own network errors included, is
//     retried and finally returned as *UnknownOutcomeError. If not rerun,
//     *UnknownOutcomeError is returned at once.
//   - Any other failure is returned as it is (joined with the context's
//     error if the context ended).
func (s *Store) retry(ctx context.Context, op string, rerun bool, fn func(context.Context) error) error {
	return s.retrySince(ctx, op, rerun, time.Now(), fn)
}

// retrySince is retry of a call that started at start, before its first
// attempt (ReclaimExpired, whose read of the due orders came first).
func (s *Store) retrySince(ctx context.Context, op string, rerun bool, start time.Time, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	actx, cancel := s.attemptCtx(ctx, start, false)
	err := fn(actx)
	cancel()
	return s.retryFrom(ctx, op, rerun, start, err, fn)
}

// retryFrom is retry of a call that started at start when the first
// attempt's result, err, is known.
func (s *Store) retryFrom(ctx context.Context, op string, rerun bool, start time.Time, err error, fn func(context.Context) error) error {
	if err == nil {
		return nil // the common case: no backoff to set up
	}
	var (
		b       *backoff.ExponentialBackOff
		unknown bool
	)
	for attempt := 1; ; attempt++ {
		var final *UnknownOutcomeError
		if errors.As(err, &final) {
			return err // answered already, not to be run again (see takeOnePG)
		}
		var ma *maybeApplied
		if errors.As(err, &ma) {
			unknown = true
			err = ma.err
			if !rerun {
				return &UnknownOutcomeError{Op: op, Attempts: attempt, Last: err, Ctx: ctx.Err()}
			}
		}
		switch {
		case err == nil:
			return nil
		case stock.IsBusiness(err):
			return err // an answer, learned by this attempt
		case !unknown && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			// The call's own bound ended the attempt before anything was
			// applied.
			return &ContentionError{Op: op, Attempts: attempt, Last: err}
		case !unknown && !transient(err):
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				return errors.Join(err, cerr)
			}
			return err
		}
		if b == nil {
			b = &backoff.ExponentialBackOff{
				InitialInterval:     s.cfg.RetryWait,
				RandomizationFactor: 0.5,
				Multiplier:          1.5,
				MaxInterval:         maxRetryWait,
			}
			b.Reset()
		}
		waits := settledWaits
		if unknown {
			waits = answerWaits
		}
		left := time.Until(start.Add(time.Duration(waits) * s.lockWait()))
		pause := b.NextBackOff()
		if attempt >= s.cfg.MaxAttempts || pause >= left || !callctx.Sleep(ctx, pause) {
			switch {
			case unknown:
				return &UnknownOutcomeError{Op: op, Attempts: attempt, Last: err, Ctx: ctx.Err()}
			case ctx.Err() != nil:
				return errors.Join(err, ctx.Err())
			}
			return &ContentionError{Op: op, Attempts: attempt, Last: err}
		}
		actx, cancel := s.attemptCtx(ctx, start, unknown)
		err = fn(actx)
		cancel()
	}
}

// transient reports whether err leaves nothing applied and is worth
// another attempt.
func transient(err error) bool {
	c := classify(err)
	return errors.Is(err, errRetry) || c == errTransient || c == errLockWait || isBadConn(err)
}
