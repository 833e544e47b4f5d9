package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

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
	lockWaitCancel := func() error {
		calls++
		// what takeOnePG returns when its LockWait context cancels the statement
		return &UnknownOutcomeError{Op: "deduct", Attempts: 1, Last: &maybeApplied{context.DeadlineExceeded}}
	}
	err := s.retryFrom(context.Background(), "deduct", true, lockWaitCancel(), lockWaitCancel)
	if calls != 1 {
		t.Fatalf("attempts: %d, want 1 (takeOnePG says it is not run again); err=%v", calls, err)
	}
}

type pgErr string

func (e pgErr) Error() string    { return "pg: " + string(e) }
func (e pgErr) SQLState() string { return string(e) }

// A group whose lock wait ran out: groupDone wraps it as ContentionError and
// settleCall hands that to retryFrom, which wraps it again.
func TestGroupLockWaitIsContentionOnce(t *testing.T) {
	s := reviewStore(t)
	c := &gcall{ctx: context.Background(), o: stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		items: []stock.Item{{SKU: "a", Qty: 1}}, done: make(chan struct{})}
	s.groupDone([]*gcall{c}, nil, pgErr("55P03"))
	err := s.settleCall(c)
	if !errors.Is(err, stock.ErrContention) {
		t.Fatalf("want contention, got %v", err)
	}
	if n := strings.Count(err.Error(), "gave up after"); n != 1 {
		t.Fatalf("ContentionError wrapped %d times: %v", n, err)
	}
}
