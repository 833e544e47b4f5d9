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
	// end is the greatest ID pending when the pass began (read with its
	// first scan): a delivery that becomes pending later has a greater
	// one (messages are read in ID order, a retry is a new entry), and
	// the pass ends once a claim's cursor is past it.
	end string
}

// claim claims up to n deliveries left unacknowledged for Redelivery
// (XAUTOCLAIM), scanning the group's pending entries from where the last
// claim of the queue stopped: a Redis server looks at no more than 10*n
// of them a call, so a scan that began at the start each time would not
// reach those behind 10*n deliveries not yet due. A claim that begins a
// pass also reads the greatest pending ID (the summary form of XPENDING,
// in the same pipeline, before the scan); once a claim's cursor is past
// it, the next claim begins a new pass, at the start, so a delivery the
// pass scanned before it was due is scanned again by the next pass
// however busy the group is. One claim of a Queue runs at a time: a
// Source that finds another's under way claims nothing this time (claims
// that overlapped would scan the same entries).
func (s *source) claim(ctx context.Context, n int) ([]handoff.Delivery, error) {
	q := s.q
	if !q.claiming.TryLock() {
		return nil, nil
	}
	claimed, err := s.scan(ctx, n)
	q.claiming.Unlock()
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
	return out, err
}

// scan runs one claim's XAUTOCLAIM from the queue's place, and moves the
// place (see claim); the caller holds q.claiming. On an error the place
// stays where it was.
func (s *source) scan(ctx context.Context, n int) ([]redis.XMessage, error) {
	q := s.q
	at := q.claimAt
	args := &redis.XAutoClaimArgs{
		Stream: q.stream, Group: q.group, Consumer: s.name, MinIdle: q.redelivery, Start: at.from, Count: int64(n),
	}
	var scan *redis.XAutoClaimCmd
	if at.from == passStart {
		var pending *redis.XPendingCmd
		if _, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			pending = p.XPending(ctx, q.stream, q.group)
			scan = p.XAutoClaim(ctx, args)
			return nil
		}); err != nil {
			return nil, err
		}
		at.end = passStart // nothing pending: the pass ends with this claim
		if p := pending.Val(); p != nil && p.Count > 0 {
			at.end = p.Higher
		}
	} else {
		scan = q.rdb.XAutoClaim(ctx, args)
	}
	claimed, next, err := scan.Result()
	if err != nil {
		return nil, err
	}
	q.claimAt = at.after(next)
	return claimed, nil
}

// after is the place after a claim from at whose scan answered the cursor
// next: the next claim goes on from next, or begins a new pass when next
// is passStart (the scan reached the last pending entry) or past the
// pass's end (it has scanned every entry pending when the pass began).
func (at claimPlace) after(next string) claimPlace {
	if next == "" || next == passStart || !idNotAfter(next, at.end) {
		return claimPlace{from: passStart}
	}
	return claimPlace{from: next, end: at.end}
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
