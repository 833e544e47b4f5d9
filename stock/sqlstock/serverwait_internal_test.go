package sqlstock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On PostgreSQL the server's lock wait of a Store's transaction runs to
// the moment its lock waits must end, and the statements' context ends
// after it, before the call's answer bound:
//   - a transaction begun at its call's start waits a whole LockWait on
//     the server, whatever the LockWait (a short one included: the
//     call's budget, two LockWaits, is not cut by the context's margin);
//   - one begun late in its call (a second attempt) waits until the
//     call's two LockWaits are up, not less.
//
// So a row freed within the bound is got, and a wait past it is ended by
// the server, which keeps the connection.
func TestServerWaitRunsToWhenTheLockWaitsMustEnd(t *testing.T) {
	for _, lockWait := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		s := &Store{d: Postgres, cfg: Config{LockWait: lockWait}}
		for _, late := range []bool{false, true} {
			start := time.Now()
			if late {
				start = start.Add(-lockWait - lockWait/10) // one attempt and a backoff ago
			}
			ctx, cancel := s.attemptCtx(context.Background(), start, false)
			before := time.Now()
			by := s.bodyBy(ctx)
			from, to := before.Add(lockWait), time.Now().Add(lockWait) // a LockWait after BEGIN
			if late {
				from, to = start.Add(settledWaits*lockWait), start.Add(settledWaits*lockWait) // the call's budget
			}
			if by.Before(from) || by.After(to) {
				t.Errorf("LockWait %v, late %v: lock waits end %v after the start, want %v to %v", lockWait, late, by.Sub(start), from.Sub(start), to.Sub(start))
			}
			most := time.Until(by)
			wait := s.serverWait(by)
			least := time.Until(by)
			ms, err := strconv.Atoi(strings.TrimSuffix(wait, "ms"))
			if err != nil || !strings.HasSuffix(wait, "ms") {
				t.Fatalf("serverWait %q is not whole milliseconds", wait)
			}
			if got := time.Duration(ms) * time.Millisecond; got < least-time.Millisecond || got > most+time.Millisecond || got > lockWait {
				t.Errorf("LockWait %v, late %v: the server waits %v, want the %v to %v left until the lock waits must end", lockWait, late, got, least, most)
			}
			end := s.bodyEnd(by)
			if deadline, _ := ctx.Deadline(); !end.After(by) || end.After(deadline) {
				t.Errorf("LockWait %v, late %v: the statements' context ends %v after their lock waits, want after them and before the call's answer bound (%v later)", lockWait, late, end.Sub(by), deadline.Sub(by))
			}
			cancel()
		}
	}
}
