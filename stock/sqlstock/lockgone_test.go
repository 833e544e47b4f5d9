package sqlstock_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/stock"
)

// lockGoneTries bounds how often a test runs a call again when, once the
// test's own lock holder rolled back, the call still finds a row locked
// (stock.ErrContention). The lock is then the library's own: a PostgreSQL
// transaction canceled at its deadline (Config.LockWait plus a slack) has
// its connection closed, and the server rolls it back only when it notices,
// which on a busy machine can be after the test's next call began. Each
// try waits at most the test's LockWait (100ms), so 50 tries give the
// server 5s to end a transaction it ends in milliseconds on a quiet one.
const lockGoneTries = 50

// onceLockGone runs call until it answers with none of the errors in
// again (stock.ErrContention, and for a call that is safe to repeat,
// stock.ErrUnknownOutcome), at most lockGoneTries times, and returns its
// last answer.
func onceLockGone(t *testing.T, call func() error, again ...error) error {
	t.Helper()
	var err error
	for try := 1; try <= lockGoneTries; try++ {
		if err = call(); !isAny(err, again) {
			if try > 1 {
				t.Logf("answered on try %d once the lock was gone", try)
			}
			return err
		}
	}
	return err
}

func isAny(err error, targets []error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// settled runs a setup step of a test whose Store has a short LockWait
// with no lock held by the test yet: on a starved machine a transaction
// that waits for no lock may still outlast that bound (it bounds the
// transaction) and be answered as contention or an unknown outcome, which
// the contract tells callers to retry with the same call.
func settled(t *testing.T, call func() error) error {
	t.Helper()
	return onceLockGone(t, call, stock.ErrContention, stock.ErrUnknownOutcome)
}
