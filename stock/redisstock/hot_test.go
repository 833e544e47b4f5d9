package redisstock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// scriptCount counts the script calls that reached the server, by SHA1.
type scriptCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *scriptCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}

func (h *scriptCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.count(c)
		}
		return err
	}
}

// count counts a script call that ran (not one the server lacked the
// script for).
func (h *scriptCount) count(cmd redis.Cmder) {
	a := cmd.Args()
	if cmd.Name() != "evalsha" || len(a) < 2 || (cmd.Err() != nil && strings.HasPrefix(cmd.Err().Error(), "NOSCRIPT")) {
		return
	}
	sha, _ := a[1].(string)
	h.mu.Lock()
	h.n[sha]++
	h.mu.Unlock()
}

func (h *scriptCount) calls(sha string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[sha]
}

// A batch of the flash sale's shape (single-line orders of one SKU, with
// distinct IDs) goes through stock_deduct_hot.lua, which takes the new
// orders and leaves the others (a repeat, a conflict, an expired hold) to
// stock_deduct_batch.lua in a second call: every order gets the outcome it
// would get alone.
func TestHotBatchLeavesTheOthersToTheBatchScript(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		count := &scriptCount{n: map[string]int{}}
		fx.loadScripts()
		fx.c.AddHook(count)
		fx.sale("a", 10, 2, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it("a", 1))), nil, "Deduct held")
		is(t, fx.s.Deduct(fx.ctx(), ord("other", "u2", it("a", 2))), nil, "Deduct other")
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u3", it("a", 1))), nil, "Deduct paid")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm paid")
		fx.want("a", 6, 3, 1)
		hot, one, batch := count.calls(redisstock.HotScriptHash()), count.calls(redisstock.OneScriptHash()), count.calls(redisstock.BatchScriptHash())
		blockers := fx.block("a") // two more single-line orders of a, held at the gate
		orders := []stock.Order{
			ord("new1", "u4", it("a", 1)),
			ord("held", "u1", it("a", 1)),  // a repeat: nil, nothing more
			ord("other", "u2", it("a", 1)), // the ID with other items
			ord("paid", "u3", it("a", 1)),  // a repeat of a confirmed order
			ord("new2", "u4", it("a", 1)),
			ord("new3", "u4", it("a", 1)), // u4's third unit: past the limit
		}
		errs := make([]error, len(orders))
		var wg sync.WaitGroup
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &errs[i], &wg)
		}
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		is(t, errs[0], nil, "new1")
		is(t, errs[1], nil, "held, repeated")
		is(t, errs[2], stock.ErrConflict, "other, with other items")
		is(t, errs[3], nil, "paid, repeated")
		is(t, errs[4], nil, "new2")
		is(t, errs[5], stock.ErrLimitReached, "new3")
		fx.want("a", 2, 7, 1) // the blockers 2, new1 and new2
		fx.wantUser("a", "u4", 2)
		// The blockers, each alone, went through the lone order's script,
		// the batch of six through the hot script; the three it left took
		// one batch script call.
		if got := count.calls(redisstock.OneScriptHash()) - one; got != 2 {
			t.Errorf("%d calls of the lone order's script, want 2 (the blockers)", got)
		}
		if got := count.calls(redisstock.HotScriptHash()) - hot; got != 1 {
			t.Errorf("%d calls of the hot script, want 1 (the batch)", got)
		}
		if got := count.calls(redisstock.BatchScriptHash()) - batch; got != 1 {
			t.Errorf("%d calls of the batch script, want 1 (the orders the hot one left)", got)
		}
	})
}

// A batch of the same order twice is not the hot script's: the batch
// script takes the order once and answers both.
func TestHotBatchOfOneOrderTwice(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		count := &scriptCount{n: map[string]int{}}
		fx.loadScripts()
		fx.c.AddHook(count)
		fx.sale("a", 10, 0, time.Minute)
		blockers := fx.block("a")
		batch := count.calls(redisstock.BatchScriptHash())
		errs := make([]error, 2)
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("twice", "u1", it("a", 3)), 1, &errs[0], &wg)
		fx.enqueue(fx.ctx(), ord("twice", "u1", it("a", 3)), 2, &errs[1], &wg)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		is(t, errs[0], nil, "the order")
		is(t, errs[1], nil, "the same order again")
		fx.want("a", 5, 5, 0) // the blockers 2, the order 3, once
		if got := count.calls(redisstock.BatchScriptHash()) - batch; got != 1 {
			t.Errorf("%d calls of the batch script, want 1", got)
		}
	})
}

// A hot call whose reply is lost and that the client sends again takes
// the stock once: the second run finds the records and leaves the orders
// to the batch script, which answers them as repeats. So does the lone
// order's script.
func TestHotBatchResentTakesOnce(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		h := &resendOnce{}
		fx.loadScripts()
		fx.c.AddHook(h)
		h.mu.Lock()
		h.sha, h.left = redisstock.OneScriptHash(), 1
		h.mu.Unlock()
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct alone, its call sent twice")
		fx.want("a", 8, 2, 0)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert")
		fx.want("a", 10, 0, 0)

		blockers := fx.block("a")
		h.mu.Lock()
		h.sha, h.left = redisstock.HotScriptHash(), 1
		h.mu.Unlock()
		errs := make([]error, 2)
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("o2", "u2", it("a", 2)), 1, &errs[0], &wg)
		fx.enqueue(fx.ctx(), ord("o3", "u3", it("a", 3)), 2, &errs[1], &wg)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		is(t, errs[0], nil, "o2, its batch's call sent twice")
		is(t, errs[1], nil, "o3, its batch's call sent twice")
		h.mu.Lock()
		left := h.left
		h.mu.Unlock()
		if left != 0 {
			t.Fatal("the batch's call was not sent twice")
		}
		fx.want("a", 3, 7, 0) // the blockers 2, o2 2, o3 3, once
	})
}

// sameSlot returns n SKU names in the slot of "a" (any names on one
// server): the lines of an order of them are one slot group on a Cluster.
func sameSlot(n int) []string {
	out := []string{"a"}
	for i := 0; len(out) < n; i++ {
		if sku := "s" + strconv.Itoa(i); keyslot.Slot(sku) == keyslot.Slot("a") {
			out = append(out, sku)
		}
	}
	return out
}

// A batch of orders of the same three SKUs goes through the hot script
// too: each order all or nothing, refused naming its first failing line
// (sold out, a user past the limit, an own hold time past the shortest
// maximum), a repeat and a conflict left to the general script.
func TestHotBatchOfSeveralLines(t *testing.T) {
	run := func(t *testing.T, fx *batchFixture) {
		count := &scriptCount{n: map[string]int{}}
		fx.loadScripts()
		fx.c.AddHook(count)
		skus := sameSlot(3)
		x, y, z := skus[0], skus[1], skus[2]
		fx.saleMax(x, 10, 0, time.Minute, 10*time.Minute)
		fx.saleMax(y, 10, 0, time.Minute, 3*time.Minute)
		fx.saleMax(z, 10, 2, 2*time.Minute, 10*time.Minute)
		three := func(id, user string, qx, qy, qz int64) stock.Order {
			return ord(id, user, it(x, qx), it(y, qy), it(z, qz))
		}
		is(t, fx.s.Deduct(fx.ctx(), three("held", "u1", 1, 1, 1)), nil, "Deduct held")
		is(t, fx.s.Deduct(fx.ctx(), ord("other", "u2", it(x, 1))), nil, "Deduct other")
		is(t, fx.s.Deduct(fx.ctx(), three("lim0", "L", 1, 1, 2)), nil, "Deduct lim0") // L holds 2 of z, its limit
		hot := count.calls(redisstock.HotScriptHash())
		fx.gate.close()
		blockers := make([]error, 2)
		var bw sync.WaitGroup
		for i := range blockers {
			bw.Go(func() {
				blockers[i] = fx.s.Deduct(fx.ctx(), three("b"+strconv.Itoa(i), "b"+strconv.Itoa(i), 1, 0+1, 1))
			})
		}
		waitFor(t, "two Deducts held at the gate", func() bool { return fx.gate.held() == 2 })
		long := three("long", "u5", 1, 1, 1)
		long.HoldTTL = 4 * time.Minute // past y's maximum (3m)
		orders := []stock.Order{
			three("new1", "u3", 2, 1, 1),
			three("held", "u1", 1, 1, 1),  // a repeat
			three("other", "u2", 1, 1, 1), // the ID with other items
			three("soldout", "u4", 1, 9, 1),
			three("limit", "L", 1, 1, 1), // past L's limit of z
			long,
			three("new2", "u6", 1, 1, 1),
		}
		errs := make([]error, len(orders))
		var wg sync.WaitGroup
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &errs[i], &wg)
		}
		fx.gate.open()
		wg.Wait()
		bw.Wait()
		for _, err := range blockers {
			is(t, err, nil, "blocker")
		}
		var se *stock.SKUError
		is(t, errs[0], nil, "new1")
		is(t, errs[1], nil, "held, repeated")
		is(t, errs[2], stock.ErrConflict, "other")
		if !errors.As(errs[3], &se) || se.SKU != y || !errors.Is(errs[3], stock.ErrSoldOut) {
			t.Errorf("soldout: %v, want ErrSoldOut naming %s", errs[3], y)
		}
		if !errors.As(errs[4], &se) || se.SKU != z || !errors.Is(errs[4], stock.ErrLimitReached) {
			t.Errorf("limit: %v, want ErrLimitReached naming %s", errs[4], z)
		}
		if !errors.As(errs[5], &se) || se.SKU != y || !errors.Is(errs[5], stock.ErrHoldTooLong) {
			t.Errorf("long: %v, want ErrHoldTooLong naming %s", errs[5], y)
		}
		is(t, errs[6], nil, "new2")
		// held, lim0, the blockers, new1 and new2; other's 1 of x
		fx.want(x, 10-1-1-1-2-2-1, 1+1+1+2+2+1, 0)
		fx.want(y, 10-1-1-2-1-1, 1+1+2+1+1, 0)
		fx.want(z, 10-1-2-2-1-1, 1+2+2+1+1, 0)
		if got := count.calls(redisstock.HotScriptHash()) - hot; got < 1 {
			t.Errorf("%d calls of the hot script", got)
		}
		// One deadline and one bound per order: the shortest hold time
		// (1m) and the shortest maximum (3m) of its SKUs, on every line.
		t0 := fx.clock.Now()
		for _, sku := range skus {
			fx.wantDeadline(sku, "new1", t0.Add(time.Minute))
			if mx := fx.field(sku, "new1", "mx"); mx != strconv.FormatInt(t0.Add(3*time.Minute).UnixMilli(), 10) {
				t.Errorf("new1's bound on %s: %s", sku, mx)
			}
		}
	}
	t.Run("one server", func(t *testing.T) { eachBatched(t, run) })
	t.Run("slot", func(t *testing.T) { eachSlotBatched(t, run) })
}
