package redisstream_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// claimRedis returns the Redis of STOCKGUARD_REDIS_ADDR (a Redis server's
// XAUTOCLAIM looks at no more than 10 times its COUNT of pending entries
// per call), or miniredis without it, and a stream name of its own, whose
// keys are deleted after the test.
func claimRedis(t *testing.T, name string) (redis.UniversalClient, string) {
	t.Helper()
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return rdb, claimStream(t, rdb, name)
}

// claimStream returns a stream name of its own for the test name, whose
// keys on rdb are deleted, and rdb closed, after the test.
func claimStream(t *testing.T, rdb redis.UniversalClient, name string) string {
	stream := fmt.Sprintf("stockguard-test-%s-%d", name, time.Now().UnixNano())
	t.Cleanup(func() {
		ctx := context.Background()
		for _, k := range []string{"{" + stream + "}", "{" + stream + "}:delayed", "{" + stream + "}:dead"} {
			_ = rdb.Del(ctx, k).Err()
		}
		_ = rdb.Close()
	})
	return stream
}

// abandonBehindLive leaves 3 deliveries abandoned by a stopped consumer
// behind live deliveries of another: it publishes live orders and then
// the 3; node 1's consumer "first" reads the live ones and its consumer
// "crashed" the 3, and node 1 stops; once Redelivery has passed, node 2's
// consumer "busy" claims the live ones (the first pending) and keeps
// them, settling them slowly. It returns the IDs of the 3 orders
// abandoned, and a time no later than busy's claim: until it is
// Redelivery old, the live deliveries are not due.
func abandonBehindLive(t *testing.T, rdb redis.UniversalClient, stream string, redelivery time.Duration, live int) ([]string, time.Time) {
	t.Helper()
	nodes := claimQueues(t, rdb, stream, redelivery, 2)
	node1, node2 := nodes[0], nodes[1]
	var abandoned []string
	for i := range live + 3 {
		id := fmt.Sprintf("live-%d", i)
		if i >= live {
			id = fmt.Sprintf("abandoned-%d", i-live)
			abandoned = append(abandoned, id)
		}
		publishOrder(t, node1, id)
	}
	fetchExactly(t, node1.Source("first"), live, 5*time.Second)
	if got := fetchExactly(t, node1.Source("crashed"), 3, 5*time.Second); got[0].Message().Order.ID != abandoned[0] {
		t.Fatalf("crashed read %s first, want %s", got[0].Message().Order.ID, abandoned[0])
	}
	time.Sleep(redelivery + 50*time.Millisecond)
	claimedAt := time.Now()
	for _, d := range fetchExactly(t, node2.Source("busy"), live, 5*time.Second) {
		if id := d.Message().Order.ID; !strings.HasPrefix(id, "live-") || d.Attempt() != 2 {
			t.Fatalf("busy claimed %s, attempt %d; want the live orders on their second attempt", id, d.Attempt())
		}
	}
	return abandoned, claimedAt
}

// On a busy queue, where every Fetch reads new orders and claims only
// every Redelivery/2, deliveries abandoned by a stopped consumer behind
// as many pending deliveries of a live consumer as one claim of a Fetch
// of 2 looks at on a Redis server (20) are claimed by another node within
// a few claims: the next claim goes on from where the last one stopped,
// rather than look at the live deliveries again.
func TestBusyQueueClaimsBehindLiveDeliveries(t *testing.T) {
	const redelivery = time.Second
	rdb, stream := claimRedis(t, "claim-busy")
	abandoned, _ := abandonBehindLive(t, rdb, stream, redelivery, 20)
	ctx := context.Background()
	node3 := claimQueues(t, rdb, stream, redelivery, 1)[0]
	src := node3.Source("c")
	// 8 Fetches, each of which claims at most once (it reads new orders):
	// claiming from the start of the pending entries each time, they
	// would have to claim the 20 live deliveries (2 a claim, once due)
	// before the abandoned ones.
	const fetches = 8
	var claimed []string
	for i := range fetches {
		if i > 0 {
			time.Sleep(redelivery / 2)
		}
		for j := range 2 {
			publishOrder(t, node3, fmt.Sprintf("new-%d-%d", i, j))
		}
		ds, err := src.Fetch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if id := d.Message().Order.ID; slices.Contains(abandoned, id) {
				claimed = append(claimed, id)
				if d.Attempt() != 2 {
					t.Errorf("%s delivered on attempt %d, want 2", id, d.Attempt())
				}
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, abandoned) {
		t.Errorf("of the deliveries abandoned behind 20 live ones, %d Fetches of 2 over %v (Redelivery %v) claimed %v; want %v",
			fetches, (fetches-1)*redelivery/2, redelivery, claimed, abandoned)
	}
}

// Fetch claims whenever it reads nothing new, and each claim goes on from
// where the last one stopped: on a quiet queue, deliveries abandoned
// behind 60 pending deliveries of a live consumer (twice as many as one
// claim of a Fetch of 3 looks at on a Redis server) are claimed by one
// Fetch while those are still live, within Redelivery/2.
func TestQuietQueueClaimsBehindLiveDeliveries(t *testing.T) {
	const redelivery = time.Second
	rdb, stream := claimRedis(t, "claim-quiet")
	abandoned, busyClaimed := abandonBehindLive(t, rdb, stream, redelivery, 60)
	ctx := context.Background()
	node3 := claimQueues(t, rdb, stream, redelivery, 1)[0]
	// Until then, the live deliveries are not due: claiming from the
	// start of the pending entries, each claim would look at them alone.
	fctx, cancel := context.WithDeadline(ctx, busyClaimed.Add(redelivery/2))
	defer cancel()
	ds, err := node3.Source("c").Fetch(fctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, d := range ds {
		claimed = append(claimed, d.Message().Order.ID)
		if d.Attempt() != 2 {
			t.Errorf("%s delivered on attempt %d, want 2", d.Message().Order.ID, d.Attempt())
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, abandoned) {
		t.Errorf("a Fetch of 3 on a quiet queue, within Redelivery/2 (%v) of the claim of 60 live deliveries ahead of 3 abandoned ones, claimed %v; want %v",
			redelivery/2, claimed, abandoned)
	}
}

// Sources of two nodes (two Queues) that claim at once, each going on
// from where its Queue's last claim stopped, claim each of 100 abandoned
// deliveries exactly once: within Redelivery, none is claimed a second
// time, and each is delivered on its second attempt.
func TestConcurrentClaimsTakeEachDeliveryOnce(t *testing.T) {
	const redelivery, abandoned = 2 * time.Second, 100
	rdb, stream := claimRedis(t, "claim-concurrent")
	ctx := context.Background()
	nodes := claimQueues(t, rdb, stream, redelivery, 3)
	for i := range abandoned {
		publishOrder(t, nodes[0], fmt.Sprintf("o%d", i))
	}
	fetchExactly(t, nodes[0].Source("crashed"), abandoned, 5*time.Second)
	time.Sleep(redelivery + 50*time.Millisecond)

	// Until then, no delivery claimed in the run is due again.
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(redelivery/2))
	defer cancel()
	type got struct {
		id      string
		attempt int
	}
	results := make(chan []got, 4)
	for i := range 4 {
		src := nodes[1+i%2].Source(fmt.Sprintf("c%d", i))
		go func() {
			var mine []got
			defer func() { results <- mine }()
			for rctx.Err() == nil {
				ds, err := src.Fetch(rctx, 3)
				if err != nil {
					t.Error(err)
					return
				}
				for _, d := range ds {
					mine = append(mine, got{d.Message().Order.ID, d.Attempt()})
					if err := d.Ack(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	times := map[string]int{}
	for range 4 {
		for _, g := range <-results {
			times[g.id]++
			if g.attempt != 2 {
				t.Errorf("%s delivered on attempt %d, want 2", g.id, g.attempt)
			}
		}
	}
	for i := range abandoned {
		if id := fmt.Sprintf("o%d", i); times[id] != 1 {
			t.Errorf("%s claimed %d times within Redelivery/2 by 4 concurrent Sources; want once", id, times[id])
		}
	}
	if len(times) != abandoned {
		t.Errorf("%d orders delivered, want the %d abandoned", len(times), abandoned)
	}
}
