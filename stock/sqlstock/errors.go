package sqlstock

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/stockguard/stockguard/stock"
)

// errClass is what a database error means to a Store.
type errClass int

const (
	errOther     errClass = iota
	errTransient          // deadlock, lock wait timeout, serialization failure, busy: nothing applied, retry
	errDuplicate          // unique key violation: the order ID is already in the ledger
)

// classify reads the driver's error code without importing any driver:
// PostgreSQL errors (pgconn.PgError, lib/pq) expose SQLState(), modernc
// SQLite errors expose Code(), and the MySQL driver's *mysql.MySQLError is
// read by its Number field.
func classify(err error) errClass {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch v := e.(type) {
		case interface{ SQLState() string }:
			switch v.SQLState() {
			case "40P01", "40001", "55P03": // deadlock, serialization failure, lock not available
				return errTransient
			case "23505": // unique violation
				return errDuplicate
			}
			return errOther
		case interface{ Code() int }:
			c := v.Code()
			switch {
			case c&0xff == 5 || c&0xff == 6: // SQLITE_BUSY, SQLITE_LOCKED and their extended codes
				return errTransient
			case c == 1555 || c == 2067: // SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
				return errDuplicate
			}
			return errOther
		}
		if n, ok := mysqlNumber(e); ok {
			switch n {
			case 1213, 1205, 3572, 1020: // deadlock, lock wait timeout, NOWAIT, record changed
				return errTransient
			case 1062: // duplicate entry
				return errDuplicate
			}
			return errOther
		}
	}
	return errOther
}

// mysqlNumber returns the Number of a *mysql.MySQLError
// (github.com/go-sql-driver/mysql), found by its type's name and field so
// that this package does not import the driver.
func mysqlNumber(err error) (uint16, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, false
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct || v.Type().Name() != "MySQLError" {
		return 0, false
	}
	f := v.FieldByName("Number")
	if f.Kind() != reflect.Uint16 {
		return 0, false
	}
	return uint16(f.Uint()), true
}

// errRetry asks retry for another attempt: an optimistic write lost, or a
// remembered setting changed under the statement that checked it.
var errRetry = errors.New("sqlstock: row changed, retrying")

// commitError is an error from COMMIT (or from a single autocommit write):
// the transaction may or may not have been applied.
type commitError struct{ err error }

func (e *commitError) Error() string { return "sqlstock: commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// ContentionError is returned when a call used up Config.MaxAttempts on
// transient failures. It matches stock.ErrContention, and
// stock.ErrUnknownOutcome too if any attempt failed at COMMIT; Unwrap
// gives the last failure.
type ContentionError struct {
	Op       string // "deduct", "confirm", ...
	Attempts int
	Unknown  bool // an attempt failed at COMMIT and its outcome was not learned
	Last     error
}

func (e *ContentionError) Error() string {
	s := "stock: contention, retry later: sqlstock: " + e.Op + " gave up after " + strconv.Itoa(e.Attempts) + " attempts"
	if e.Unknown {
		s += " (outcome unknown, retry with the same order ID)"
	}
	return s + ": " + e.Last.Error()
}

// Is reports whether target is stock.ErrContention, or
// stock.ErrUnknownOutcome when an attempt's outcome is unknown.
func (e *ContentionError) Is(target error) bool {
	return target == stock.ErrContention || (e.Unknown && target == stock.ErrUnknownOutcome)
}

// Unwrap returns the last failure.
func (e *ContentionError) Unwrap() error { return e.Last }

// retry runs op until it succeeds, fails for a reason retrying cannot fix,
// or used up MaxAttempts; attempts are spaced by jittered exponential
// backoff. op's transient failures, errRetry and commit failures are
// retried: every operation retried this way is idempotent by order ID, so
// running it again after an unknown COMMIT reads the ledger to learn what
// happened.
func (s *Store) retry(ctx context.Context, op string, fn func() error) error {
	first := fn()
	var ce *commitError
	if first == nil || (!errors.As(first, &ce) && !errors.Is(first, errRetry) && classify(first) != errTransient) {
		return first // the common case: no backoff to set up
	}
	var (
		last     error
		attempts int
		unknown  bool
	)
	b := &backoff.ExponentialBackOff{
		InitialInterval:     s.cfg.RetryWait,
		RandomizationFactor: 0.5,
		Multiplier:          1.5,
		MaxInterval:         maxRetryWait,
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempts++
		err := first
		if attempts > 1 {
			err = fn()
		}
		last = err
		var ce *commitError
		switch {
		case err == nil:
			return struct{}{}, nil
		case errors.As(err, &ce):
			unknown = true
			return struct{}{}, err
		case errors.Is(err, errRetry), classify(err) == errTransient:
			return struct{}{}, err
		}
		unknown = false
		return struct{}{}, backoff.Permanent(err)
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(s.cfg.MaxAttempts)), backoff.WithMaxElapsedTime(time.Duration(1<<62)))
	switch {
	case err == nil:
		return nil
	case last == nil: // canceled before the first attempt
		return err
	case ctx.Err() != nil && !errors.Is(last, ctx.Err()):
		if unknown {
			return errors.Join(stock.ErrUnknownOutcome, last, ctx.Err())
		}
		return errors.Join(last, ctx.Err())
	case unknown || errors.Is(last, errRetry) || classify(last) == errTransient:
		return &ContentionError{Op: op, Attempts: attempts, Unknown: unknown, Last: last}
	}
	return last
}
