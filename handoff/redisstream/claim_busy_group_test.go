package redisstream_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
)

// A busy group of 12 nodes (one Queue and one consumer each, batches of
// 2): at every claim, the other 11 consumers hold 22 deliveries, all read
// since that Queue's last claim (the busy queue turned over in between),
// more than one claim of a Fetch of 2 looks at on a Redis server (20).
// A consumer stops holding 3 deliveries, at the head of the group's
// pending entries. Every node's claims pass over them while they are not
// yet due and then go on through the live deliveries; once they are due,
// the package doc promises they are claimed within about P/(10n)+2 = 3
// claims of a Queue (P = 25): each pass over the pending entries ends
// once it has scanned those pending when it began, and the next begins
// at the first again. 9 claims of each Queue once due take all 3.
//
// It runs on the Redis of STOCKGUARD_REDIS_ADDR, or on miniredis, whose
// XAUTOCLAIM looks at every pending entry.
func TestBusyGroupClaimsDeliveriesAPassScannedBeforeDue(t *testing.T) {
	rdb, stream := claimRedis(t, "claim-busy-group")
	busyGroupClaims(t, rdb, stream)
}

// The same on a Redis Cluster (STOCKGUARD_REDIS_CLUSTER).
func TestBusyGroupClaimsDeliveriesAPassScannedBeforeDueCluster(t *testing.T) {
	addrs := os.Getenv("STOCKGUARD_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("STOCKGUARD_REDIS_CLUSTER not set")
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	busyGroupClaims(t, rdb, claimStream(t, rdb, "claim-busy-group"))
}

// busyGroupClaims runs the busy group of 12 nodes on stream of rdb.
func busyGroupClaims(t *testing.T, rdb redis.UniversalClient, stream string) {
	const (
		redelivery = 2 * time.Second
		tick       = 3 * redelivery / 4 // over Redelivery/2: every Fetch of a tick claims
		nodes      = 12
		batch      = 2
		ticks      = 11 // ticks 3 to 11 come after the abandoned deliveries are due
	)
	ctx := context.Background()
	crashedNode := claimQueues(t, rdb, stream, redelivery, 1)[0]
	abandoned := []string{"abandoned-0", "abandoned-1", "abandoned-2"}
	for _, id := range abandoned {
		publishOrder(t, crashedNode, id)
	}
	fetchExactly(t, crashedNode.Source("crashed"), 3, 5*time.Second)
	// The node of "crashed" stops here: its 3 deliveries are never settled.

	srcs := make([]handoff.Source, nodes)
	for i, q := range claimQueues(t, rdb, stream, redelivery, nodes) {
		srcs[i] = q.Source(fmt.Sprintf("node%d-0", i))
	}
	held := make([][]handoff.Delivery, nodes)
	var claimed []string
	var claimedTick []int
	for tk := 1; tk <= ticks; tk++ {
		if tk > 1 {
			time.Sleep(tick)
		}
		for j := range nodes * batch {
			publishOrder(t, crashedNode, fmt.Sprintf("new-%d-%d", tk, j))
		}
		for i, src := range srcs {
			for _, d := range held[i] {
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ds, err := src.Fetch(fctx, batch)
			cancel()
			if err != nil || len(ds) != batch {
				t.Fatalf("tick %d, node %d: Fetch gave %d deliveries, %v; want %d", tk, i, len(ds), err, batch)
			}
			held[i] = ds
			for _, d := range ds {
				if id := d.Message().Order.ID; slices.Contains(abandoned, id) {
					claimed = append(claimed, id)
					claimedTick = append(claimedTick, tk)
					if d.Attempt() != 2 {
						t.Errorf("%s delivered on attempt %d, want 2", id, d.Attempt())
					}
				} else if !strings.HasPrefix(id, "new-") || d.Attempt() != 1 {
					t.Fatalf("tick %d, node %d: %s delivered on attempt %d; want a new order on its first (no live delivery is due)", tk, i, id, d.Attempt())
				}
			}
		}
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, abandoned) {
		t.Errorf("3 deliveries abandoned at the head of the pending entries, due from tick 3, behind 22 live deliveries turned over between claims: "+
			"in %d ticks of %v each node's claim (%d claims of each of %d Queues once due) took %v (ticks %v); want %v",
			ticks, tick, ticks-2, nodes, claimed, claimedTick, abandoned)
	}
}
