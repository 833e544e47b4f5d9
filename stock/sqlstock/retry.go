package sqlstock

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/stockguard/stockguard/stock"
)

// retry runs one call's attempt fn until it gives an answer, and returns
// that answer classified by the one rule of outcomes:
//
//   - A context already done returns its error before fn is run: nothing
//     was sent.
//   - Transient failures (deadlock, lock wait timeout, serialization
//     failure, SQLITE_BUSY, errRetry, a pooled connection found dead) are
//     run again with jittered exponential backoff, up to MaxAttempts; then
//     the call fails with *ContentionError: nothing was applied.
//   - Once an attempt may have applied its writes (*maybeApplied), the
//     call's outcome is unknown. If rerun, fn is run again to learn it
//     (every such call is idempotent by order or operation ID, so the
//     ledger answers); only a success or a business answer ends the
//     unknown, and every other failure, the re-run's own network errors
//     included, is retried and finally returned as *UnknownOutcomeError.
//     If not rerun, *UnknownOutcomeError is returned at once.
//   - Any other failure is returned as it is (joined with the context's
//     error if the context ended).
func (s *Store) retry(ctx context.Context, op string, rerun bool, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.retryFrom(ctx, op, rerun, fn(), fn)
}

// retryFrom is retry when the first attempt's result, err, is known.
func (s *Store) retryFrom(ctx context.Context, op string, rerun bool, err error, fn func() error) error {
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
		case !unknown && !transient(err):
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				return errors.Join(err, cerr)
			}
			return err
		}
		if !unknown && classify(err) == errLockWait {
			// The lock wait already took Config.LockWait: another attempt
			// would wait as long again, past the bound the caller was given.
			return &ContentionError{Op: op, Attempts: attempt, Last: err}
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
		if attempt >= s.cfg.MaxAttempts || !sleep(ctx, b.NextBackOff()) {
			switch {
			case unknown:
				return &UnknownOutcomeError{Op: op, Attempts: attempt, Last: err, Ctx: ctx.Err()}
			case ctx.Err() != nil:
				return errors.Join(err, ctx.Err())
			}
			return &ContentionError{Op: op, Attempts: attempt, Last: err}
		}
		err = fn()
	}
}

// transient reports whether err leaves nothing applied and is worth
// another attempt.
func transient(err error) bool {
	c := classify(err)
	return errors.Is(err, errRetry) || c == errTransient || c == errLockWait || isBadConn(err)
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
