package redisstream

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
)

// claim claims up to n deliveries left unacknowledged for Redelivery
// (XAUTOCLAIM), scanning the group's pending entries from where the last
// claim of the queue stopped: a Redis server looks at no more than 10*n
// of them a call, so a scan that began at the start each time would not
// reach those behind 10*n deliveries not yet due.
func (s *source) claim(ctx context.Context, n int) ([]handoff.Delivery, error) {
	q := s.q
	start := q.claimStart()
	claimed, next, err := q.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: q.stream, Group: q.group, Consumer: s.name, MinIdle: q.redelivery, Start: start, Count: int64(n),
	}).Result()
	if err != nil {
		return nil, err
	}
	q.claimScanned(start, next)
	var out []handoff.Delivery
	for _, x := range claimed {
		count, err := s.deliveries(ctx, x.ID)
		if err != nil {
			return out, err
		}
		if count > 0 {
			out = append(out, s.delivery(x, count))
		}
	}
	return out, nil
}

// claimStart returns where the next claim begins its scan.
func (q *Queue) claimStart() string {
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	return q.claimFrom
}

// claimScanned records that a claim scanned from start up to next, the
// cursor XAUTOCLAIM answered ("0-0": it reached the end, and the next
// scan begins at the start again). A claim of another Source that began
// at the same place and ended first has moved the cursor already: it is
// left as it is, so that it moves only to the end of a scan that began
// where it was, and never skips over pending entries.
func (q *Queue) claimScanned(start, next string) {
	if next == "" {
		next = "0-0"
	}
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	if q.claimFrom == start {
		q.claimFrom = next
	}
}

// deliveries returns the delivery count of the pending message id (0 if
// it is not pending any more).
func (s *source) deliveries(ctx context.Context, id string) (int64, error) {
	p, err := s.q.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s.q.stream, Group: s.q.group, Start: id, End: id, Count: 1}).Result()
	if err != nil || len(p) == 0 {
		return 0, err
	}
	return p[0].RetryCount, nil
}
