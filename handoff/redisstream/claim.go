package redisstream

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
)

// passStart is the cursor of the first pending entry: a claim that scans
// from it begins a pass over the group's pending entries.
const passStart = "0-0"

// claimPlace is where the claims of a Queue are in their pass over the
// group's pending entries.
type claimPlace struct {
	// from is where the next claim begins its scan: the cursor the last
	// one answered, or passStart to begin a new pass.
	from string
	// end is the ID of the newest stream entry when the pass began (read
	// before its first scan): every delivery pending then has an ID no
	// greater, and the pass ends once a claim's cursor is past it.
	end string
	// gen counts the moves of the place, so that only a claim that began
	// where it still is moves it.
	gen uint64
}

// claim claims up to n deliveries left unacknowledged for Redelivery
// (XAUTOCLAIM), scanning the group's pending entries from where the last
// claim of the queue stopped: a Redis server looks at no more than 10*n
// of them a call, so a scan that began at the start each time would not
// reach those behind 10*n deliveries not yet due. A claim that begins a
// pass also reads the newest entry of the stream (XREVRANGE, in the same
// pipeline, before the scan); once a claim's cursor is past it, the next
// claim begins a new pass, at the start, so a delivery the pass scanned
// before it was due is scanned again by the next pass however busy the
// group is.
func (s *source) claim(ctx context.Context, n int) ([]handoff.Delivery, error) {
	q := s.q
	at := q.claimPlace()
	args := &redis.XAutoClaimArgs{
		Stream: q.stream, Group: q.group, Consumer: s.name, MinIdle: q.redelivery, Start: at.from, Count: int64(n),
	}
	var (
		claimed []redis.XMessage
		next    string
		end     = at.end
	)
	if at.from == passStart {
		var newest *redis.XMessageSliceCmd
		var scan *redis.XAutoClaimCmd
		if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			newest = p.XRevRangeN(ctx, q.stream, "+", "-", 1)
			scan = p.XAutoClaim(ctx, args)
			return nil
		}); err != nil {
			return nil, err
		}
		end = passStart // an empty stream: the pass ends with this claim
		if m := newest.Val(); len(m) > 0 {
			end = m[0].ID
		}
		claimed, next = scan.Val()
	} else {
		var err error
		if claimed, next, err = q.rdb.XAutoClaim(ctx, args).Result(); err != nil {
			return nil, err
		}
	}
	q.claimScanned(at, next, end)
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

// claimPlace returns where the next claim begins.
func (q *Queue) claimPlace() claimPlace {
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	return q.claimAt
}

// claimScanned records that a claim that began at place at scanned up to
// next, the cursor XAUTOCLAIM answered, in the pass that ends at end. The
// next claim goes on from next, or begins a new pass when next is
// passStart (the scan reached the last pending entry) or past end (the
// pass has scanned every entry pending when it began). A claim of
// another Source of the queue that began at the same place and ended
// first has moved the place already: it is left as it is, so that it
// moves only to the end of a scan that began where it is, and never
// skips over pending entries.
func (q *Queue) claimScanned(at claimPlace, next, end string) {
	to := claimPlace{from: next, end: end, gen: at.gen + 1}
	if next == "" || next == passStart || !idNotAfter(next, end) {
		to.from, to.end = passStart, ""
	}
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	if q.claimAt.gen == at.gen {
		q.claimAt = to
	}
}

// idNotAfter tells whether the stream entry ID a (milliseconds-sequence)
// is no greater than b, comparing both parts as numbers. It is false when
// either does not parse, which ends a pass early but skips nothing.
func idNotAfter(a, b string) bool {
	ams, aseq, ok := parseID(a)
	if !ok {
		return false
	}
	bms, bseq, ok := parseID(b)
	if !ok {
		return false
	}
	return ams < bms || ams == bms && aseq <= bseq
}

// parseID returns the two parts of the stream entry ID id.
func parseID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	seq, err = strconv.ParseUint(b, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return ms, seq, true
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
