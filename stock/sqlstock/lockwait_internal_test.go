package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock"
)

func reviewStore(t *testing.T) *Store {
	db, err := sql.Open("sqlite", "file:lockwait?mode=memory")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// takeOnePG's "answered now, not run again" UnknownOutcomeError carries the
// *maybeApplied from execWrite as Last; retryFrom finds it through
// Unwrap() []error and runs the attempt again (each one may wait LockWait).
func TestTakeOnePGCanceledAtLockWaitIsNotRunAgain(t *testing.T) {
	s := reviewStore(t)
	calls := 0
	lockWaitCancel := func(context.Context) error {
		calls++
		// what takeOnePG returns when its LockWait context cancels the statement
		return &UnknownOutcomeError{Op: "deduct", Attempts: 1, Last: &maybeApplied{context.DeadlineExceeded}}
	}
	err := s.retryFrom(context.Background(), "deduct", true, time.Now(), lockWaitCancel(nil), lockWaitCancel)
	if calls != 1 {
		t.Fatalf("attempts: %d, want 1 (takeOnePG says it is not run again); err=%v", calls, err)
	}
}

type pgErr string

func (e pgErr) Error() string    { return "pg: " + string(e) }
func (e pgErr) SQLState() string { return string(e) }

// A group whose lock wait ran out when its call's time is up: groupDone
// wraps it as ContentionError and settleCall hands that to retryFrom, which
// wraps it again.
func TestGroupLockWaitIsContentionOnce(t *testing.T) {
	s := reviewStore(t)
	c := &gcall{ctx: context.Background(), o: stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		items: []stock.Item{{SKU: "a", Qty: 1}}, done: make(chan struct{}), at: time.Now().Add(-s.AnswerBound())}
	s.groupDone([]*gcall{c}, nil, pgErr("55P03"))
	err := s.settleCall(c)
	if !errors.Is(err, stock.ErrContention) {
		t.Fatalf("want contention, got %v", err)
	}
	if n := strings.Count(err.Error(), "gave up after"); n != 1 {
		t.Fatalf("ContentionError wrapped %d times: %v", n, err)
	}
}

// A call whose outcome became unknown runs again to learn it only within
// its answer bound (three LockWaits from its start), not MaxAttempts times
// whatever each re-run waits: re-runs that each wait out a lock end with
// stock.ErrUnknownOutcome by the bound (they used to run on until the
// caller's own deadline, 8 LockWaits by default).
func TestUnknownOutcomeReRunsStopAtTheAnswerBound(t *testing.T) {
	s := reviewStore(t)
	s.cfg.LockWait, s.cfg.MaxAttempts = 100*time.Millisecond, 1000
	runs := 0
	rerun := func(ctx context.Context) error {
		runs++
		select { // a lock wait of 60ms, or less if the attempt's own bound ends it
		case <-time.After(60 * time.Millisecond):
		case <-ctx.Done():
		}
		return pgErr("55P03")
	}
	start := time.Now()
	err := s.retryFrom(context.Background(), "deduct", true, start, &maybeApplied{errors.New("COMMIT reply lost")}, rerun)
	took := time.Since(start)
	if !errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("re-runs that never learn the outcome: %v, want an unknown outcome of the Store's own bound", err)
	}
	if bound := s.AnswerBound(); took > bound+time.Second {
		t.Fatalf("answered after %v (%d re-runs), past the bound %v and a second's margin", took, runs, bound)
	}
}
