package redisstream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// overlapClaims makes the claims of a client overlap where they
// can: each waits until `of` of them are waiting (at most 100ms, or until
// its context ends), so that claims that run at once have all read the
// Queue's place before any of them moves it. It counts them, and records the count when one claims the entry
// watch.
type overlapClaims struct {
	of    int
	watch string

	mu      sync.Mutex
	waiting int
	round   chan struct{}

	n      atomic.Int64
	takenN atomic.Int64
}

func (o *overlapClaims) wait(ctx context.Context) error {
	o.mu.Lock()
	if o.round == nil {
		o.round = make(chan struct{})
	}
	r := o.round
	o.waiting++
	if o.waiting == o.of {
		close(r)
		o.round, o.waiting = nil, 0
	}
	o.mu.Unlock()
	select {
	case <-r:
		return nil
	case <-time.After(100 * time.Millisecond):
		o.mu.Lock()
		if o.round == r {
			o.waiting--
		}
		o.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *overlapClaims) took(cmd redis.Cmder) {
	for _, id := range claimedIDs(cmd) {
		if id == o.watch {
			o.takenN.CompareAndSwap(0, o.n.Load())
		}
	}
}

// hook is the redis.Hook that makes the claims of a client sent alone
// overlap, and counts them; pipelines pass untouched.
func (o *overlapClaims) hook() redis.Hook {
	return &claimHook{wait: o.wait, ran: func(cmd redis.Cmder) { o.n.Add(1); o.took(cmd) }, alone: true}
}

// Four Sources of one Queue (one node's consumers) whose claims overlap
// (on a quiet queue they all wake from XREADGROUP's Block at once): a
// delivery abandoned behind 100 pending deliveries of a live consumer is
// due. The package doc promises it is claimed within about P/(10n)+2 =
// 101/10+2 = 12 claims of the Queue (n = 1, no claim takes anything
// before it). Claims that overlapped would look at the same 10 entries:
// the Queue would make 4 claims for every 10 entries looked at.
func TestOverlappingSourcesOfAQueueClaimWithinBound(t *testing.T) {
	const (
		redelivery = 30 * time.Second
		live       = 100
		sources    = 4
	)
	rdb, stream := claimRedis(t, "claim-overlap")
	ctx := context.Background()
	node1 := claimQueues(t, rdb, stream, redelivery, 1)[0]
	for i := range live {
		publishOrder(t, node1, fmt.Sprintf("live-%d", i))
	}
	publishOrder(t, node1, "abandoned")
	fetchExactly(t, node1.Source("live"), live, 5*time.Second)
	if ds := fetchExactly(t, node1.Source("crashed"), 1, 5*time.Second); ds[0].Message().Order.ID != "abandoned" {
		t.Fatalf("crashed read %s, want abandoned", ds[0].Message().Order.ID)
	}
	// The abandoned delivery is due (XCLAIM IDLE JUSTID counts no
	// delivery on a Redis server); the live ones are not, for 30s.
	abandoned := lastEntry(t, rdb, node1)
	makeDue(t, rdb, node1, abandoned, redelivery)

	// Node 2: its own client, whose claims overlap in rounds of 4.
	o := &overlapClaims{of: sources, watch: abandoned}
	rdb2 := redis.NewClient(rdb.(*redis.Client).Options())
	defer rdb2.Close()
	rdb2.AddHook(o.hook())
	node2 := claimQueues(t, rdb2, stream, redelivery, 1)[0]
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := make(chan string, sources)
	var wg sync.WaitGroup
	for i := range sources {
		src := node2.Source(fmt.Sprintf("node2-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				ds, _ := src.Fetch(rctx, 1)
				for _, d := range ds {
					got <- d.Message().Order.ID
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	close(got)
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != "abandoned" {
		t.Fatalf("node 2's Sources took %v; want the abandoned delivery, once", ids)
	}
	if n := o.takenN.Load(); n > 14 {
		t.Errorf("the abandoned delivery, due, behind 100 pending: taken by claim number %d of node 2's Queue (4 Sources whose claims overlap); the package doc promises about P/(10n)+2 = 101/10+2 = 12", n)
	}
}
