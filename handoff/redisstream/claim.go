package redisstream

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
// pass also reads the greatest pending ID (before the scan); once a
// claim's cursor is past it, the next claim begins a new pass, at the
// start, so a delivery the pass scanned before it was due is scanned
// again by the next pass however busy the group is. One claim of a Queue
// runs at a time: a Source that finds another's under way claims nothing
// this time (claims that overlapped would scan the same entries). The
// claim, the mark and each claimed delivery's count are one script call
// (handoff_claim.lua): what it took is in its reply, whatever happens to
// ctx after it. On an error the place stays where it was.
func (s *source) claim(ctx context.Context, n int) ([]handoff.Delivery, error) {
	q := s.q
	if !q.claiming.TryLock() {
		return nil, nil
	}
	defer q.claiming.Unlock()
	at := q.claimAt
	begins := ""
	if at.from == passStart {
		begins = "1"
	}
	r, err := claimScript.Run(ctx, q.rdb, []string{q.stream}, q.group, s.name, q.redelivery.Milliseconds(), at.from, n, begins).Slice()
	if err != nil {
		return nil, err
	}
	if len(r) < 2 || (len(r)-2)%3 != 0 {
		return nil, fmt.Errorf("redisstream: unexpected reply of the claim script: %v", r)
	}
	next, _ := r[0].(string)
	if at.from == passStart {
		at.end = passStart // nothing pending: the pass ends with this claim
		if high, _ := r[1].(string); high != "" {
			at.end = high
		}
	}
	q.claimAt = at.after(next)
	var out []handoff.Delivery
	for i := 2; i < len(r); i += 3 {
		id, _ := r[i].(string)
		payload, _ := r[i+1].(string)
		count, _ := r[i+2].(int64)
		out = append(out, s.delivery(id, payload, count))
	}
	return out, nil
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
