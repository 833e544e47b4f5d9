package redisstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A group that lags: when node 2's pass over the pending entries begins,
// 21 deliveries are pending (an abandoned one, D, at the head, and 20 a
// live consumer holds) and 600 messages are in the stream, not yet read.
// The pass's first claim (a Fetch of 1, looking at 10 pending entries)
// passes over D while it is not due, and the live consumer then reads the
// 600 and holds them. Once D is due, the package doc promises it is
// claimed within about P/(10n)+2 claims of the Queue, P = 21 pending when
// the pass under way began, n = 1: about 4; no claim takes anything until
// D's. The pass's end mark is the stream's newest entry, which was not yet
// read: the pass goes on through the 600 deliveries read after it began
// (62 claims) before a new one looks at D again.
//
// Every delivery but D is kept not due by a Redelivery of 30s; D is made
// due by setting its idle time (XCLAIM IDLE JUSTID, which on a Redis
// server counts no delivery). On miniredis, whose XAUTOCLAIM looks at
// every pending entry, the first claim takes D.
func TestLaggingGroupClaimsDueDeliveryWithinBound(t *testing.T) {
	const (
		redelivery = 30 * time.Second
		live       = 20
		backlog    = 600
	)
	rdb, stream := claimRedis(t, "claim-lagging")
	counter := countClaims(rdb)
	ctx := context.Background()
	nodes := claimQueues(t, rdb, stream, redelivery, 2)
	node1, node2 := nodes[0], nodes[1]
	publishOrder(t, node1, "abandoned")
	for i := range live {
		publishOrder(t, node1, fmt.Sprintf("live-%d", i))
	}
	for i := range backlog {
		publishOrder(t, node1, fmt.Sprintf("backlog-%d", i))
	}
	crashed := fetchExactly(t, node1.Source("crashed"), 1, 5*time.Second)
	if id := crashed[0].Message().Order.ID; id != "abandoned" {
		t.Fatalf("crashed read %s, want abandoned", id)
	}
	liveSrc := node1.Source("live")
	fetchExactly(t, liveSrc, live, 5*time.Second)
	// Node 2's first claim begins a pass (21 pending) and passes over D,
	// not yet due; its Fetch then reads backlog-0.
	c := node2.Source("c")
	if ds := fetchExactly(t, c, 1, 5*time.Second); ds[0].Message().Order.ID != "backlog-0" || ds[0].Attempt() != 1 {
		t.Fatalf("c read %s on attempt %d, want backlog-0 on its first", ds[0].Message().Order.ID, ds[0].Attempt())
	}
	if got := counter.Load(); got != 3 {
		t.Fatalf("%d XAUTOCLAIMs so far, want 3 (one a Fetch)", got)
	}
	// The live consumer reads the rest of the backlog (no claim: its
	// last was within Redelivery/2).
	fetchExactly(t, liveSrc, backlog-1, 5*time.Second)

	// D is due.
	stKey, _, _, _ := node1.Keys()
	pend, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stKey, Group: "stockguard", Start: "-", End: "+", Count: 1}).Result()
	if err != nil || len(pend) != 1 {
		t.Fatalf("XPENDING: %v, %v", pend, err)
	}
	makeDue(t, rdb, node1, pend[0].ID, redelivery)

	before := counter.Load()
	ds := fetchExactly(t, c, 1, 20*time.Second) // on a quiet queue a Fetch claims every Block or so
	claims := counter.Load() - before
	if id := ds[0].Message().Order.ID; id != "abandoned" || ds[0].Attempt() < 2 {
		t.Fatalf("c got %s on attempt %d, want abandoned, claimed", id, ds[0].Attempt())
	}
	if claims > 6 {
		t.Errorf("the abandoned delivery, due, was claimed by claim number %d of node 2; the package doc promises about P/(10n)+2 = 21/10+2 = 4 (P = 21 pending when the pass began)", claims)
	}
}

// A delivery abandoned (D) is read after a pass began, behind 600
// deliveries read after it too, and is due while that pass is under way:
// every pass that reaches D first looks at the 620 deliveries pending
// ahead of it. The package doc's bound, (P+A)/(10n)+2 claims with P = 20
// pending when the pass began, A = 620 ahead of D and n = 1, is 66: the
// pass under way ends at its mark, and the next reaches D.
func TestDeliveryPendingAfterPassBeganClaimedWithinBound(t *testing.T) {
	const (
		redelivery = 30 * time.Second
		live       = 20
		backlog    = 600
	)
	rdb, stream := claimRedis(t, "claim-after-pass")
	counter := countClaims(rdb)
	nodes := claimQueues(t, rdb, stream, redelivery, 2)
	node1, node2 := nodes[0], nodes[1]
	for i := range live {
		publishOrder(t, node1, fmt.Sprintf("live-%d", i))
	}
	publishOrder(t, node1, "first")
	liveSrc := node1.Source("live")
	fetchExactly(t, liveSrc, live, 5*time.Second)
	// Node 2's first claim begins a pass (20 pending, 10 looked at); its
	// Fetch then reads "first".
	c := node2.Source("c")
	if ds := fetchExactly(t, c, 1, 5*time.Second); ds[0].Message().Order.ID != "first" {
		t.Fatalf("c read %s, want first", ds[0].Message().Order.ID)
	}
	for i := range backlog {
		publishOrder(t, node1, fmt.Sprintf("backlog-%d", i))
	}
	publishOrder(t, node1, "abandoned")
	fetchExactly(t, liveSrc, backlog, 5*time.Second)
	if ds := fetchExactly(t, node1.Source("crashed"), 1, 5*time.Second); ds[0].Message().Order.ID != "abandoned" {
		t.Fatalf("crashed read %s, want abandoned", ds[0].Message().Order.ID)
	}
	// D is due.
	makeDue(t, rdb, node1, lastEntry(t, rdb, node1), redelivery)
	before := counter.Load()
	ds := fetchExactly(t, c, 1, 20*time.Second) // on a quiet queue a Fetch claims every Block or so
	claims := counter.Load() - before
	if id := ds[0].Message().Order.ID; id != "abandoned" || ds[0].Attempt() < 2 {
		t.Fatalf("c got %s on attempt %d, want abandoned, claimed", id, ds[0].Attempt())
	}
	if claims > 68 {
		t.Errorf("the abandoned delivery, due while the pass begun with 20 pending was under way, was claimed by claim number %d of node 2; the package doc promises about (P+A)/(10n)+2 = (20+620)/10+2 = 66", claims)
	}
}
