package sqlstock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On PostgreSQL the server's lock wait of a Store's transaction runs to
// the moment its lock waits must end, or close to it, and the statements'
// context ends after the server's wait, never past the call's budget:
//   - a transaction begun at its call's start waits a whole LockWait on
//     the server, whatever the LockWait (a short one included), and its
//     context ends a little later;
//   - one begun late in its call (a second attempt) waits until a
//     twentieth of a LockWait (at least 5ms, at most 50ms) before the call's two
//     LockWaits are up, and its context ends when they are: a statement
//     that waits twice ends within the budget too.
//
// So a row freed within the bound is got, a wait past it is ended by the
// server first, which keeps the connection, and the call answers within
// its two LockWaits.
func TestServerWaitRunsToWhenTheLockWaitsMustEnd(t *testing.T) {
	for _, lockWait := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		s := &Store{d: Postgres, cfg: Config{LockWait: lockWait}}
		margin := min(50*time.Millisecond, max(5*time.Millisecond, lockWait/20))
		for _, late := range []bool{false, true} {
			start := time.Now()
			if late {
				start = start.Add(-lockWait - lockWait/10) // one attempt and a backoff ago
			}
			ctx, cancel := s.attemptCtx(context.Background(), start, false)
			budget := start.Add(settledWaits * lockWait)
			before := time.Now()
			by := s.bodyBy(ctx)
			from, to := before.Add(lockWait), time.Now().Add(lockWait) // a LockWait after BEGIN
			if late {
				from, to = budget, budget
			}
			if by.Before(from) || by.After(to) {
				t.Errorf("LockWait %v, late %v: lock waits end %v after the start, want %v to %v", lockWait, late, by.Sub(start), from.Sub(start), to.Sub(start))
			}
			end := s.bodyEnd(ctx, by)
			switch {
			case !late && (!end.After(by) || end.After(budget)):
				t.Errorf("LockWait %v: the statements' context ends %v after their lock waits, want after them and by the budget (%v later)", lockWait, end.Sub(by), budget.Sub(by))
			case late && !end.Equal(budget):
				t.Errorf("LockWait %v, late: the statements' context ends %v after the budget, want at it", lockWait, end.Sub(budget))
			}
			serverEnd := by
			if late {
				serverEnd = budget.Add(-margin)
			}
			most := time.Until(serverEnd)
			wait := s.serverWait(ctx, by)
			least := time.Until(serverEnd)
			ms, err := strconv.Atoi(strings.TrimSuffix(wait, "ms"))
			if err != nil || !strings.HasSuffix(wait, "ms") {
				t.Fatalf("serverWait %q is not whole milliseconds", wait)
			}
			if got := time.Duration(ms) * time.Millisecond; got < least-time.Millisecond || got > most+time.Millisecond || got > lockWait {
				t.Errorf("LockWait %v, late %v: the server waits %v, want %v to %v", lockWait, late, got, least, most)
			}
			cancel()
		}
	}
}
