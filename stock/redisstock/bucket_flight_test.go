package redisstock_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// The refills of one process run one at a time per SKU, also when one
// stalls: the Deducts waiting for a refill that outlasts the lease's
// lifetime (a starved machine, a call that hangs) hand it to one of them
// and wait for that one, instead of each taking the lease on its own. When
// each went on alone, a busy machine turned every buyer of a node into a
// lease poller, which starved the refills further: the conformance sale
// on a Cluster stalled for minutes.
//
// Sequence: 30 units in 3 buckets; bucket 0 emptied; the first refill of
// 20 buyers of bucket 0 stalls 3 s before its first lease call (the
// waiters give up on it after 2 s, bucketLease); while it is stalled, at
// most one other refill at a time asks for the lease.
func TestStalledRefillIsTakenOverByOneWaiter(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n, buyers = 3, 20
		fx.bucketSale("hot", 30, 0, time.Minute, n)
		us := usersIn(n, 0, buyers+1, "u")
		is(t, fx.s.Deduct(ctx, ord("drain", us[0], it("hot", 10))), nil, "Deduct of bucket 0's units")

		var (
			mu     sync.Mutex
			first  string              // the token of the stalled refill
			active = map[string]bool{} // the other refills that asked for the lease and did not drop it
			most   int
		)
		hash := redisstock.BucketLeaseScriptHash()
		fx.c.AddHook(checkHook(func(cmds []redis.Cmder) {
			for _, c := range cmds {
				args := c.Args()
				if len(args) < 7 || args[1] != hash {
					continue
				}
				mode, _ := args[5].(string)
				token, _ := args[6].(string)
				mu.Lock()
				switch {
				case first == "" && mode == "take":
					first = token
					mu.Unlock()
					time.Sleep(3 * time.Second)
					continue
				case token == first:
				case mode == "take":
					active[token] = true
					most = max(most, len(active))
				case mode == "drop":
					delete(active, token)
				}
				mu.Unlock()
			}
		}))

		var wg sync.WaitGroup
		errs := make([]error, buyers)
		for i := range buyers {
			wg.Go(func() { errs[i] = fx.s.Deduct(ctx, ord("o"+strconv.Itoa(i), us[1+i], it("hot", 1))) })
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		// One waiter takes over; a takeover that itself stalls past the
		// lease's lifetime (a starved machine) may be taken over once more.
		if most < 1 || most > 2 {
			t.Fatalf("%d refills at once asked for the lease beside the stalled one; want 1 (one waiter takes over, the others wait for it)", most)
		}
		placed := int64(0)
		for i, err := range errs {
			switch {
			case err == nil:
				placed++
			case errors.Is(err, stock.ErrContention):
				// The stalled refill finds the lease taken over (the
				// contract's retryable refusal: nothing held).
			default:
				t.Errorf("buyer %d: Deduct: %v", i, err)
			}
		}
		fx.want("hot", 20-placed, 10+placed, 0)
	})
}

// One refill serves every Deduct of the bucket that waits for it: it
// brings the lines of all of them, not only its own order's. When each
// refill brought one order's units, the buyers of an emptied bucket took
// a refill each (less what a refill moves to even the buckets out), and
// every waiting buyer tried again after each: on a starved machine the
// bucketed sale crawled.
//
// Sequence: 30 units in 3 buckets; bucket 0 emptied; 20 buyers of bucket
// 0 order 1 unit each; the first refill waits (before its first lease
// call) until the 20 Deducts wait for it (at most 30 s: a starved
// machine). Then it is the only refill; margin: on a machine so starved
// that the joins outlast the lease's lifetime (2 s), a waiter takes the
// refill over once, so at most 2 (5 before).
func TestOneRefillServesTheWaitingBuyers(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n, buyers = 3, 20
		fx.bucketSale("hot", 30, 0, time.Minute, n)
		us := usersIn(n, 0, buyers+1, "u")
		is(t, fx.s.Deduct(ctx, ord("drain", us[0], it("hot", 10))), nil, "Deduct of bucket 0's units")

		var (
			mu     sync.Mutex
			tokens = map[string]bool{}
		)
		lease := redisstock.BucketLeaseScriptHash()
		fx.c.AddHook(checkHook(func(cmds []redis.Cmder) {
			for _, c := range cmds {
				args := c.Args()
				if len(args) < 7 || args[1] != lease || args[5] != "take" {
					continue
				}
				token, _ := args[6].(string)
				mu.Lock()
				first := len(tokens) == 0
				tokens[token] = true
				mu.Unlock()
				for end := time.Now().Add(30 * time.Second); first && fx.s.FlightWant("hot") < buyers && time.Now().Before(end); {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}))

		var wg sync.WaitGroup
		errs := make([]error, buyers)
		for i := range buyers {
			wg.Go(func() { errs[i] = fx.s.Deduct(ctx, ord("o"+strconv.Itoa(i), us[1+i], it("hot", 1))) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("buyer %d: Deduct: %v", i, err)
			}
		}
		fx.want("hot", 0, 30, 0)
		if len(tokens) > 2 {
			t.Fatalf("%d refills for %d waiting buyers of one bucket; want 1 (2 with a takeover)", len(tokens), buyers)
		}
	})
}
