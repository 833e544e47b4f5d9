package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// afterScript runs fn once, right after the first pipeline carrying the
// script sha has run (between that call's round trip and its caller's
// next one).
type afterScript struct {
	mu  sync.Mutex
	sha string
	fn  func()
}

func (h *afterScript) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		fn := h.fn
		if fn != nil && has(cmds, h.sha) {
			h.fn = nil
		} else {
			fn = nil
		}
		h.mu.Unlock()
		if fn != nil {
			fn()
		}
		return err
	}
}

// A partial return that lands between Snapshot's script and its read of
// the holds' quantities: the snapshot is one instant, so the holds it
// reports add up to the held count it reports. (Before, the quantity was
// read after the return, while the counts were read before it: a
// reconciler then counted the returned units as on their way back, and
// raised Redis by them a second time.)
func TestReview13SnapshotHoldsAddUpToHeldAcrossAReturn(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 5))), nil, "Deduct")
		h := &afterScript{sha: redis.NewScript(lua.Script("stock_snapshot.lua")).Hash()}
		var rerr error
		h.fn = func() { rerr = fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it("a", 2))) }
		fx.loadScripts()
		fx.c.AddHook(h)
		got, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		is(t, rerr, nil, "RevertItems between the snapshot's round trips")
		sum := int64(0)
		for _, hd := range got[0].Holds {
			sum += hd.Qty
		}
		if sum != got[0].Held || got[0].Available+got[0].Held != 10 {
			t.Fatalf("snapshot available %d, held %d, holds %+v (%d units): not one instant",
				got[0].Available, got[0].Held, got[0].Holds, sum)
		}
		fx.want("a", 7, 3, 0)
	})
}

// dropAfterFirst sends only the first command of the first pipeline that
// carries the script sha and loses the rest (one node of a Cluster got its
// part, the process died before the others'); the caller sees a lost reply.
type dropAfterFirst struct {
	mu    sync.Mutex
	sha   string
	armed bool
}

func (h *dropAfterFirst) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *dropAfterFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *dropAfterFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		hit := h.armed && len(cmds) > 1 && has(cmds, h.sha)
		if hit {
			h.armed = false
		}
		h.mu.Unlock()
		if !hit {
			return next(ctx, cmds)
		}
		_ = next(ctx, cmds[:1])
		for _, c := range cmds {
			c.SetErr(errLostReply)
		}
		return errLostReply
	}
}

// A return of an order on two slots applied on one of them (the call an
// unknown outcome) stays the order's return in progress until it is
// completed: another return of the order must not be checked against the
// lines it has not reached, however long its caller takes to retry. (Before,
// the return lock ended with its 30s lease: another return then checked
// those lines, was applied and told nil, and the first's retry, told nil
// too, gave back nothing on the line the other had emptied: two returns
// told nil for four units of a line of two.) Once the lease has passed,
// the next return completes the first one, then runs.
func TestReview13HalfAppliedReturnKeepsTheOrderUntilCompleted(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct")
		h := &dropAfterFirst{sha: redis.NewScript(lua.Script("stock_return.lua")).Hash(), armed: true}
		fx.loadScripts()
		fx.c.AddHook(h)
		r1 := rt("r1", "o1", it(lo, 1), it(hi, 2))
		unknown(t, fx.s.RevertItems(fx.ctx(), r1), "RevertItems applied on one slot")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 8, 2, 0)
		r2 := rt("r2", "o1", it(hi, 2))
		is(t, fx.s.RevertItems(fx.ctx(), r2), stock.ErrContention, "another return while the first may still run")

		// The lease passes: a lock that lives no longer than ReturnLease
		// is gone.
		if lease, _, ok := fx.returnLock("o1"); ok && lease != 0 {
			fx.dropReturnLock("o1")
		}
		fx.clock.Advance(redisstock.ReturnLease + time.Second)
		is(t, fx.s.RevertItems(fx.ctx(), r2), stock.ErrExceedsOrder, "another return after the lease (the first completed before it)")
		fx.want(hi, 10, 0, 0)
		is(t, fx.s.RevertItems(fx.ctx(), r1), nil, "the retry of the first return")
		got, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		want := []stock.Item{it(lo, 1), it(hi, 2)}
		if lo > hi {
			want[0], want[1] = want[1], want[0]
		}
		if fmt.Sprint(got[0].Returned) != fmt.Sprint(want) || got[0].State != stock.StateHeld {
			t.Fatalf("Orders = %+v; want held, returned %v", got[0], want)
		}
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 10, 0, 0)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r3", "o1", it(lo, 1))), nil, "a third return")
		fx.want(lo, 10, 0, 0)
	})
}

// A return that completed but could not give its lock up (the unlock
// never reached the server) keeps other returns out only until its lease
// has passed; then the next return finds it complete and runs.
func TestReview13LockLeftByACompletedReturnHeals(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 3), it(hi, 3))), nil, "Deduct")
		fx.hook.arm(3, 1, true) // lock, lock kept, applies pass; the unlock is never sent
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 1))), nil, "a return whose unlock is lost")
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 8, 2, 0)
		r2 := rt("r2", "o1", it(lo, 1), it(hi, 1))
		is(t, fx.s.RevertItems(fx.ctx(), r2), stock.ErrContention, "within the lease")
		fx.clock.Advance(redisstock.ReturnLease + time.Second)
		is(t, fx.s.RevertItems(fx.ctx(), r2), nil, "after the lease")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 9, 1, 0)
		if _, _, ok := fx.returnLock("o1"); ok {
			t.Fatalf("the return lock is left after a completed return")
		}
	})
}

// One batched script call with orders with and without their own hold
// time, one of them past the maximum and a repeat under another hold time:
// each order gets its own deadline, the bound of its SKUs, and the refused
// one writes nothing (no directory entry, no record, no user count).
func TestReview13BatchMixesOwnHoldTimes(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		t0 := fx.clock.Now()
		fx.saleMax("a", 10, 5, time.Minute, 5*time.Minute)
		blockers := fx.block("a")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		orders := []stock.Order{
			{ID: "own", UserID: "u1", Items: []stock.Item{it("a", 1)}, HoldTTL: 2 * time.Minute},
			{ID: "plain", UserID: "u1", Items: []stock.Item{it("a", 1)}},
			{ID: "long", UserID: "u2", Items: []stock.Item{it("a", 1)}, HoldTTL: 6 * time.Minute},
			{ID: "own", UserID: "u1", Items: []stock.Item{it("a", 1)}, HoldTTL: 4 * time.Minute},
		}
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &errs[i], &wg)
		}
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		is(t, errs[0], nil, "own hold time")
		is(t, errs[1], nil, "no own hold time")
		is(t, errs[2], stock.ErrHoldTooLong, "past the maximum")
		is(t, errs[3], nil, "a repeat with another hold time")
		fx.wantDeadline("a", "own", t0.Add(2*time.Minute))
		fx.wantDeadline("a", "plain", t0.Add(time.Minute))
		bound := fmt.Sprint(t0.Add(5 * time.Minute).UnixMilli())
		if a, b := fx.field("a", "own", "mx"), fx.field("a", "plain", "mx"); a != bound || b != bound {
			t.Fatalf("bounds %s, %s; want %s", a, b, bound)
		}
		if fx.hasRecord("a", "long") || fx.entryTTL("long") != -2 {
			t.Fatalf("the refused order left its record or its directory entry")
		}
		fx.wantUser("a", "u2", 0)
		fx.wantUser("a", "u1", 2)
		fx.want("a", 6, 4, 0)
	})
}

// The lock a half-applied return left outlives its order's records; an
// order that reuses the ID later never gets that return applied to it (it
// was never applied there): the next return of the new order takes the
// lock over and gives back only its own items.
func TestReview13LeftLockNeverAppliesToANewOrderOfTheID(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct")
		h := &dropAfterFirst{sha: redis.NewScript(lua.Script("stock_return.lua")).Hash(), armed: true}
		fx.loadScripts()
		fx.c.AddHook(h)
		unknown(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 2))), "RevertItems applied on one slot")
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		// Retention passes: the order's records and entry are gone.
		fx.delEntry("o1")
		fx.delRecord(lo, "o1")
		fx.delRecord(hi, "o1")
		fx.clock.Advance(redisstock.ReturnLease + time.Second)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "a new order under the ID")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(hi, 1))), nil, "a return of the new order")
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 9, 1, 0)
	})
}

// beforeScript runs fn once, right before the first pipeline carrying the
// script sha is sent.
type beforeScript struct {
	mu  sync.Mutex
	sha string
	fn  func()
}

func (h *beforeScript) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		fn := h.fn
		if fn != nil && has(cmds, h.sha) {
			h.fn = nil
		} else {
			fn = nil
		}
		h.mu.Unlock()
		if fn != nil {
			fn()
		}
		return next(ctx, cmds)
	}
}

// A return that empties an order on two slots, checked just before the
// deadline, while a reclaimer expires one of its lines between the check
// and the applies: no line is left held, so the order has ended and its
// directory entry must get Retention like its records (before, only
// reverted and refunded lines counted as ended: the entry kept no TTL and
// bound the order ID for good).
func TestReview13ReturnThatEndsAnOrderAReclaimerExpiredEndsItsEntry(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		fx.clock.Advance(time.Minute - time.Millisecond)
		h := &beforeScript{sha: redis.NewScript(lua.Script("stock_return.lua")).Hash()}
		var got []stock.Reclaimed
		var rerr error
		h.fn = func() {
			fx.clock.Advance(time.Millisecond)
			got, rerr = fx.s.ReclaimExpired(fx.ctx(), 1)
		}
		fx.loadScripts()
		fx.c.AddHook(h)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 1))), nil, "RevertItems of the whole order")
		if rerr != nil || len(got) != 1 {
			t.Fatalf("the reclaimer between the check and the applies: %v, %v; want one line", got, rerr)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		if ttl := fx.entryTTL("o1"); ttl <= 0 {
			t.Fatalf("directory entry TTL %v after every line ended, want Retention", ttl)
		}
	})
}

// The retry of a half-applied return takes the lock again before its own
// check: if it fails there, the lock must still name the return as
// applying, for as long as before (a plain lock with ReturnLease would end,
// and leave the half-applied return to be checked against again).
func TestReview13RetryNeverShortensTheLockOfAHalfAppliedReturn(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct")
		h := &dropAfterFirst{sha: redis.NewScript(lua.Script("stock_return.lua")).Hash(), armed: true}
		fx.loadScripts()
		fx.c.AddHook(h)
		r1 := rt("r1", "o1", it(lo, 1), it(hi, 2))
		unknown(t, fx.s.RevertItems(fx.ctx(), r1), "RevertItems applied on one slot")
		fx.hook.arm(1, 1, true) // the retry's lock passes, its taking the lock again is never sent
		if err := fx.s.RevertItems(fx.ctx(), r1); err == nil {
			t.Fatal("the retry succeeded with its second lock call lost")
		}
		if lease, v, ok := fx.returnLock("o1"); !ok || lease != 0 || !strings.Contains(v, "\n") {
			t.Fatalf("the lock of a half-applied return after a failed retry: lease %d, value %q, found %v; want it applying, kept with the entry", lease, v, ok)
		}
		fx.clock.Advance(redisstock.ReturnLease + time.Second)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(hi, 1))), stock.ErrExceedsOrder, "another return (the first completed before it)")
		is(t, fx.s.RevertItems(fx.ctx(), r1), nil, "the retry")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// An extension of an order on two slots whose second group is refused by
// the server after the first moved its line (here: that line's record gone
// between the check and the applies) has written: its error must be an
// unknown outcome, never a plain one, which says nothing was applied.
func TestReview13ExtendRefusedAfterAGroupMovedIsAnUnknownOutcome(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		t0 := fx.clock.Now()
		fx.saleMax(lo, 10, 0, time.Minute, 10*time.Minute)
		fx.saleMax(hi, 10, 0, time.Minute, 10*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		h := &beforeScript{sha: redis.NewScript(lua.Script("stock_extend.lua")).Hash()}
		h.fn = func() { fx.delRecord(hi, "o1") }
		fx.loadScripts()
		fx.c.AddHook(h)
		err := fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(5*time.Minute))
		fx.wantDeadline(lo, "o1", t0.Add(5*time.Minute))
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("ExtendHold with one group moved and one refused: %v, want an unknown outcome", err)
		}
	})
}

// returnLock reads the return lock in the order's directory entry: its
// lease (ms, the server's time; 0: as long as the entry) and value; ok is
// false when the entry has none.
func (fx *fixture) returnLock(order string) (lease int64, value string, ok bool) {
	fx.t.Helper()
	v, err := fx.c.HGet(fx.ctx(), fx.s.DirKey(order), order).Result()
	if err != nil && err != redis.Nil {
		fx.t.Fatal(err)
	}
	for _, f := range strings.Split(v, "\t")[1:] {
		if at, val, found := strings.Cut(strings.TrimPrefix(f, "l"), ":"); found && f[0] == 'l' {
			if lease, err = strconv.ParseInt(at, 10, 64); err != nil {
				fx.t.Fatalf("malformed return lock in entry %q", v)
			}
			return lease, val, true
		}
	}
	return 0, "", false
}

// dropReturnLock takes the return lock out of the order's directory entry,
// as its lease passing would (the servers' time is not the test's clock).
func (fx *fixture) dropReturnLock(order string) {
	fx.t.Helper()
	v, err := fx.c.HGet(fx.ctx(), fx.s.DirKey(order), order).Result()
	if err != nil {
		fx.t.Fatal(err)
	}
	fields := strings.Split(v, "\t")
	kept := fields[:1]
	for _, f := range fields[1:] {
		if f[0] != 'l' {
			kept = append(kept, f)
		}
	}
	if err := fx.c.HSet(fx.ctx(), fx.s.DirKey(order), order, strings.Join(kept, "\t")).Err(); err != nil {
		fx.t.Fatal(err)
	}
}
