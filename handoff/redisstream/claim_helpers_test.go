package redisstream_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

// claimBody and claimSHA are the claim script's text and SHA-1: a claim is
// one call of it (EVALSHA, or EVAL after NOSCRIPT).
var (
	claimBody = lua.Script("handoff_claim.lua")
	claimSHA  = func() string { h := sha1.Sum([]byte(claimBody)); return hex.EncodeToString(h[:]) }()
)

// isClaim tells whether cmd is a call of the claim script.
func isClaim(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == claimSHA
	case "eval":
		return args[1] == claimBody
	}
	return false
}

// ranClaim tells whether cmd, sent with the error err (a hook's, which
// cmd.Err() may not show yet), is a call of the claim script that ran
// (not one the server answered NOSCRIPT, which go-redis sends again as
// EVAL).
func ranClaim(cmd redis.Cmder, err error) bool {
	if err == nil {
		err = cmd.Err()
	}
	return isClaim(cmd) && (err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT"))
}

// claimedIDs are the IDs of the deliveries a claim script call took.
func claimedIDs(cmd redis.Cmder) []string {
	c, ok := cmd.(*redis.Cmd)
	if !ok || !isClaim(cmd) || c.Err() != nil {
		return nil
	}
	r, _ := c.Slice()
	var ids []string
	for i := 2; i+2 < len(r); i += 3 {
		if id, ok := r[i].(string); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// claimHook is a redis.Hook that calls ran after every call of the claim
// script that ran (ranClaim), sent alone or in a pipeline; with alone,
// pipelines pass untouched. With wait, a claim sent alone is sent only
// once wait returns, and an error of wait is the claim's. Other commands
// pass untouched.
type claimHook struct {
	wait  func(ctx context.Context) error
	ran   func(cmd redis.Cmder)
	alone bool
}

func (h *claimHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *claimHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isClaim(cmd) {
			return next(ctx, cmd)
		}
		if h.wait != nil {
			if err := h.wait(ctx); err != nil {
				return err
			}
		}
		err := next(ctx, cmd)
		if ranClaim(cmd, err) {
			h.ran(cmd)
		}
		return err
	}
}

func (h *claimHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	if h.alone {
		return next
	}
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if ranClaim(cmd, nil) {
				h.ran(cmd)
			}
		}
		return err
	}
}

// countClaims adds to rdb a hook that counts the claims (claim script
// calls that ran) rdb sends, alone or in a pipeline, and returns the count.
func countClaims(rdb redis.UniversalClient) *atomic.Int64 {
	n := new(atomic.Int64)
	rdb.AddHook(&claimHook{ran: func(redis.Cmder) { n.Add(1) }})
	return n
}

// claimQueues returns k Queues of stream on rdb (k nodes of one group),
// with the given Redelivery and a Block of 10ms.
func claimQueues(t *testing.T, rdb redis.UniversalClient, stream string, redelivery time.Duration, k int) []*redisstream.Queue {
	t.Helper()
	qs := make([]*redisstream.Queue, k)
	for i := range qs {
		q, err := redisstream.New(context.Background(), rdb, redisstream.Config{Stream: stream, Redelivery: redelivery, Block: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		qs[i] = q
	}
	return qs
}

// publishOrder publishes on q the order id, of one unit of SKU "a", sent
// now; the test fails if Publish does.
func publishOrder(t *testing.T, q *redisstream.Queue, id string) {
	t.Helper()
	if err := q.Publish(context.Background(), handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}, Sent: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// fetchExactly is one Fetch of n from src whose context ends after
// within; the test fails unless it returns n deliveries and no error.
func fetchExactly(t *testing.T, src handoff.Source, n int, within time.Duration) []handoff.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ds, err := src.Fetch(ctx, n)
	if err != nil || len(ds) != n {
		t.Fatalf("Fetch: %d deliveries, %v; want %d", len(ds), err, n)
	}
	return ds
}

// lastEntry returns the ID of the newest entry of q's stream.
func lastEntry(t *testing.T, rdb redis.UniversalClient, q *redisstream.Queue) string {
	t.Helper()
	stKey, _, _, _ := q.Keys()
	last, err := rdb.XRevRangeN(context.Background(), stKey, "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("XREVRANGE: %v, %v", last, err)
	}
	return last[0].ID
}

// makeDue makes the delivery of entry id, pending to the consumer
// "crashed", due: idle for 2*redelivery (XCLAIM IDLE JUSTID, which on a
// Redis server counts no delivery).
func makeDue(t *testing.T, rdb redis.UniversalClient, q *redisstream.Queue, id string, redelivery time.Duration) {
	t.Helper()
	stKey, _, _, _ := q.Keys()
	if err := rdb.Do(context.Background(), "XCLAIM", stKey, "stockguard", "crashed", 0, id, "IDLE", (2 * redelivery).Milliseconds(), "JUSTID").Err(); err != nil {
		t.Fatal(err)
	}
}
