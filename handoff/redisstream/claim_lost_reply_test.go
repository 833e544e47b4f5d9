package redisstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff/redisstream"
)

// afterClaim returns a redis.Hook that runs act once, right after a
// claim (sent alone or in a pipeline) whose reply took the entry watch.
func afterClaim(watch string, act func()) redis.Hook {
	var once sync.Once
	return &claimHook{ran: func(cmd redis.Cmder) {
		for _, id := range claimedIDs(cmd) {
			if id == watch {
				once.Do(act)
			}
		}
	}}
}

// failPendingRange makes the range form of XPENDING (a lookup of one
// entry's delivery count) sent as a command of its own fail while armed:
// a connection error.
type failPendingRange struct {
	mu    sync.Mutex
	armed bool
}

func (f *failPendingRange) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failPendingRange) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		f.mu.Lock()
		armed := f.armed
		f.mu.Unlock()
		if armed && cmd.Name() == "xpending" && len(cmd.Args()) > 3 {
			err := errors.New("connection reset")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failPendingRange) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// abandonDue publishes one order, which the consumer "crashed" reads and
// abandons; its delivery is made due (idle for 2*Redelivery, XCLAIM IDLE
// JUSTID). It returns the entry ID.
func abandonDue(t *testing.T, rdb redis.UniversalClient, q *redisstream.Queue, redelivery time.Duration) string {
	t.Helper()
	publishOrder(t, q, "abandoned")
	fetchExactly(t, q.Source("crashed"), 1, 5*time.Second)
	id := lastEntry(t, rdb, q)
	makeDue(t, rdb, q, id, redelivery)
	return id
}

// owner returns the consumer the entry id is pending to ("" if none).
func owner(t *testing.T, rdb redis.UniversalClient, q *redisstream.Queue, id string) string {
	t.Helper()
	stKey, _, _, _ := q.Keys()
	p, err := rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: stKey, Group: "stockguard", Start: id, End: id, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) == 0 {
		return ""
	}
	return p[0].Consumer
}

// A Fetch whose context ends (Consumer.Run gives each Fetch Poll) just
// after its claim took a due delivery: the delivery is now the
// fetching consumer's (XAUTOCLAIM moved it and reset its idle time), so
// no claim takes it for another Redelivery. handoff.Source promises a
// Fetch whose ctx ends "returns what it has": it must return it.
func TestClaimThenContextEndReturnsClaimed(t *testing.T) {
	const redelivery = 30 * time.Second
	rdb, stream := claimRedis(t, "claim-ctx")
	ctx := context.Background()
	q := claimQueues(t, rdb, stream, redelivery, 1)[0]
	id := abandonDue(t, rdb, q, redelivery)

	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rdb.AddHook(afterClaim(id, cancel)) // the Fetch's deadline passes as the claim's reply arrives
	ds, err := q.Source("c").Fetch(fctx, 1)
	if err != nil {
		t.Fatalf("Fetch whose ctx ended: %v, want no error", err)
	}
	who := owner(t, rdb, q, id)
	if who != "c" {
		t.Fatalf("the abandoned delivery is pending to %q after c's Fetch; want c (its claim took it)", who)
	}
	if len(ds) != 1 || ds[0].Message().Order.ID != "abandoned" {
		t.Errorf("c's Fetch claimed the abandoned delivery (it is pending to c now, not due for another %v) but returned %d deliveries; want it", redelivery, len(ds))
	}
	// No other Fetch gets it meanwhile.
	gctx, gcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer gcancel()
	if got, _ := q.Source("d").Fetch(gctx, 1); len(got) != 0 {
		t.Logf("d got %s", got[0].Message().Order.ID)
	} else if len(ds) == 0 {
		t.Errorf("and a Fetch of another Source gets nothing: the order waits, in nobody's hands, for Redelivery")
	}
}

// The same with a failed round trip after the claim (a lookup of the
// claimed delivery's count, were it a round trip of its own): the claimed
// delivery must be returned, with or without the error; handoff.Source
// promises deliveries returned with an error are the consumer's.
func TestClaimLookupErrorReturnsClaimed(t *testing.T) {
	const redelivery = 30 * time.Second
	rdb, stream := claimRedis(t, "claim-err")
	ctx := context.Background()
	q := claimQueues(t, rdb, stream, redelivery, 1)[0]
	id := abandonDue(t, rdb, q, redelivery)

	fail := &failPendingRange{}
	rdb.AddHook(fail)
	rdb.AddHook(afterClaim(id, func() { fail.mu.Lock(); fail.armed = true; fail.mu.Unlock() }))
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, ferr := q.Source("c").Fetch(fctx, 1)
	fail.mu.Lock()
	fail.armed = false
	fail.mu.Unlock()
	who := owner(t, rdb, q, id)
	if who != "c" {
		t.Fatalf("the abandoned delivery is pending to %q after c's Fetch; want c (its claim took it)", who)
	}
	if len(ds) != 1 || ds[0].Message().Order.ID != "abandoned" {
		t.Errorf("c's Fetch (error %v) claimed the abandoned delivery (pending to c, not due for another %v) but returned %d deliveries; want it, with or without the error", ferr, redelivery, len(ds))
	}
}
