package redisstock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
		const buyers = 20
		us := fx.bucketZeroEmptied(buyers)

		var (
			mu     sync.Mutex
			first  string              // the token of the stalled refill
			active = map[string]bool{} // the other refills that asked for the lease and did not drop it
			most   int
		)
		hash := redisstock.BucketLeaseScriptHash()
		fx.loadScripts()
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

		errs := buyAtOnce(ctx, fx.s, us)
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
		const buyers = 20
		us := fx.bucketZeroEmptied(buyers)

		var (
			mu     sync.Mutex
			tokens = map[string]bool{}
		)
		lease := redisstock.BucketLeaseScriptHash()
		fx.loadScripts()
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

		errs := buyAtOnce(ctx, fx.s, us)
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

// One Deduct of a process at a time reads a SKU's bucket count once it
// is past the cache's lifetime; the others go by the count they had
// meanwhile. When every Deduct that found the count stale read it, a
// server slowed down past the count's cache lifetime (1 s) kept it stale
// for good, and each Deduct paid an extra round trip on the slowed
// server: beside 8 busy loops the conformance sale on a Cluster stalled
// for minutes with 235 buyers each waiting on their own read.
//
// Sequence: a SKU in 3 buckets; a Store that read its count, 1.1 s ago
// (past the cache's lifetime); 20 buyers at once; the first count read is
// held until the 19 others have answered (a second read starting, the old
// code's herd, or 30 s, end it sooner). At most one read at a time, and
// nobody waits for it.
func TestOneBuyerRefreshesAStaleBucketCount(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n, buyers = 3, 20
		fx.bucketSale("hot", 100, 0, time.Minute, n)
		stale := newStore(t, fx.c, fx.cfg)
		if _, err := stale.Levels(ctx, "hot"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		us := usersIn(n, 0, buyers, "u")

		var (
			mu       sync.Mutex
			inFlight int
			most     int
			held     bool
			answered atomic.Int32
			timedOut bool // the held read ended by its 30 s bound
		)
		fx.c.AddHook(aroundHook(func(cmds []redis.Cmder, next func() error) error {
			if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
				a := c.Args()
				return len(a) == 4 && a[0] == "hmget" && a[2] == "bk"
			}) {
				return next()
			}
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			first := !held
			held = true
			mu.Unlock()
			for end := time.Now().Add(30 * time.Second); first && answered.Load() < buyers-1; time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				herd := inFlight > 1
				timedOut = time.Now().After(end)
				mu.Unlock()
				if herd || timedOut {
					break
				}
			}
			err := next()
			mu.Lock()
			inFlight--
			mu.Unlock()
			return err
		}))

		var wg sync.WaitGroup
		for i, u := range us {
			wg.Go(func() {
				if err := stale.Deduct(ctx, ord("o"+strconv.Itoa(i), u, it("hot", 1))); err != nil {
					t.Errorf("buyer %d: Deduct: %v", i, err)
				}
				answered.Add(1)
			})
		}
		wg.Wait()
		fx.want("hot", 100-buyers, buyers, 0)
		if most != 1 {
			t.Fatalf("%d reads of the bucket count at once for %d buyers; want 1", most, buyers)
		}
		if timedOut {
			t.Fatal("the other buyers waited for the held read of the bucket count")
		}
	})
}

// A refill frees the SKU's transfer lease even when Redis answers slowly,
// and its answer does not hang on that: the drop waited at most 1 s, so on
// a starved machine the lease stayed held (on miniredis, whose keys do not
// expire with the wall clock, for good: the conformance sale on a Cluster
// stalled with every refill refused "another refill of it did not finish
// in time"), and the Deduct whose refill had moved its units answered an
// unknown outcome.
//
// Sequence: 30 units in 3 buckets; bucket 0 emptied; a buyer of bucket 0
// needs a refill, whose lease drop Redis answers 1.5 s late.
func TestSlowLeaseDropFreesTheLease(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		us := fx.bucketZeroEmptied(1)
		hash := redisstock.BucketLeaseScriptHash()
		fx.loadScripts()
		fx.c.AddHook(aroundHook(func(cmds []redis.Cmder, next func() error) error {
			if a := cmds[0].Args(); len(a) > 5 && a[1] == hash && a[5] == "drop" {
				time.Sleep(1500 * time.Millisecond)
			}
			return next()
		}))
		is(t, fx.s.Deduct(ctx, ord("o", us[0], it("hot", 1))), nil, "Deduct whose refill's drop is slow")
		if n := fx.c.Exists(ctx, fx.bucketKey("hot", ":bl")).Val(); n != 0 {
			t.Fatal("the transfer lease is still held after the refill ended")
		}
		fx.want("hot", 19, 11, 0)
	})
}

// A refill whose lease take lost its reply drops the lease it may hold:
// before, the lease stayed held until it expired, and every other refill
// of the SKU waited for it and was refused.
//
// Sequence: 30 units in 3 buckets; bucket 0 emptied; a buyer of bucket 0
// needs a refill, whose lease take is applied and its reply lost; then
// another buyer of bucket 0.
func TestLostLeaseTakeIsDropped(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		us := fx.bucketZeroEmptied(2)
		fx.loadScripts()
		hash := redisstock.BucketLeaseScriptHash()
		var lost atomic.Bool
		fx.c.AddHook(aroundHook(func(cmds []redis.Cmder, next func() error) error {
			err := next()
			if a := cmds[0].Args(); len(a) > 5 && a[1] == hash && a[5] == "take" && err == nil && lost.CompareAndSwap(false, true) {
				cmds[0].SetErr(errLostReply)
				return errLostReply
			}
			return err
		}))
		err := fx.s.Deduct(ctx, ord("o1", us[0], it("hot", 1)))
		if !lost.Load() {
			t.Fatalf("no lease take lost its reply (Deduct: %v)", err)
		}
		if n := fx.c.Exists(ctx, fx.bucketKey("hot", ":bl")).Val(); n != 0 {
			t.Fatalf("the transfer lease of the lost take is still held (Deduct: %v)", err)
		}
		is(t, fx.s.Deduct(ctx, ord("o2", us[1], it("hot", 1))), nil, "Deduct of the next buyer of bucket 0")
	})
}

// aroundHook calls f for each command and pipeline; f runs it by calling
// next.
type aroundHook func(cmds []redis.Cmder, next func() error) error

func (f aroundHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f aroundHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return f([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (f aroundHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return f(cmds, func() error { return next(ctx, cmds) })
	}
}

// A refill that is slow but gets its replies is not taken over: only one
// that got no reply for the lease's lifetime is. When every refill that
// outlasted the lease was taken over, a starved machine (each reply late,
// the whole refill past 2 s) had the replacement wait for the lease the
// slow refill still held, and every buyer waiting try its order again for
// nothing.
//
// Sequence: 30 units in 3 buckets; bucket 0 emptied; 10 buyers of bucket
// 0; the first refill takes the lease once all 10 wait for it, and the
// four round trips after that are each answered 600 ms late (2.4 s in
// all, past the 2 s lease; the longest wait between two of its rounds'
// replies is 1.2 s, 0.8 s of margin). No other refill holds the lease
// while it does.
func TestSlowRefillIsNotTakenOver(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const buyers = 10
		us := fx.bucketZeroEmptied(buyers)

		var (
			mu     sync.Mutex
			active = map[string]bool{} // refills that took the lease and did not drop it
			most   int
			slow   = -1 // round trips left to slow down; -1 before the first take
		)
		hash := redisstock.BucketLeaseScriptHash()
		fx.loadScripts()
		fx.c.AddHook(aroundHook(func(cmds []redis.Cmder, next func() error) error {
			a := cmds[0].Args()
			lease := len(a) > 6 && a[1] == hash
			if lease && a[5] == "take" {
				mu.Lock()
				first := slow < 0
				active[a[6].(string)] = true
				most = max(most, len(active))
				mu.Unlock()
				for end := time.Now().Add(30 * time.Second); first && fx.s.FlightWant("hot") < buyers && time.Now().Before(end); {
					time.Sleep(5 * time.Millisecond)
				}
				if first {
					mu.Lock()
					slow = 4
					mu.Unlock()
				}
				return next()
			}
			mu.Lock()
			if lease && a[5] == "drop" {
				delete(active, a[6].(string))
			}
			delay := slow > 0
			if delay {
				slow--
			}
			mu.Unlock()
			if delay {
				time.Sleep(600 * time.Millisecond)
			}
			return next()
		}))

		errs := buyAtOnce(ctx, fx.s, us)
		for i, err := range errs {
			if err != nil {
				t.Errorf("buyer %d: Deduct: %v", i, err)
			}
		}
		fx.want("hot", 20-buyers, 10+buyers, 0)
		if most != 1 {
			t.Fatalf("%d refills held the lease at once; want 1 (the slow one, not taken over)", most)
		}
	})
}

// bucketZeroEmptied puts 30 units of "hot" on sale in 3 buckets, has a
// user of bucket 0 take its 10, and returns n more users of bucket 0.
func (fx *fixture) bucketZeroEmptied(n int) []string {
	fx.t.Helper()
	fx.bucketSale("hot", 30, 0, time.Minute, 3)
	us := usersIn(3, 0, n+1, "u")
	is(fx.t, fx.s.Deduct(fx.ctx(), ord("drain", us[0], it("hot", 10))), nil, "Deduct of bucket 0's units")
	return us[1:]
}

// buyAtOnce has each of users order one unit of "hot" (order "o<i>") on
// s, all at once, and returns each Deduct's answer.
func buyAtOnce(ctx context.Context, s *redisstock.Store, users []string) []error {
	var wg sync.WaitGroup
	errs := make([]error, len(users))
	for i, u := range users {
		wg.Go(func() { errs[i] = s.Deduct(ctx, ord("o"+strconv.Itoa(i), u, it("hot", 1))) })
	}
	wg.Wait()
	return errs
}
