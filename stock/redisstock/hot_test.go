package redisstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		if a := cmd.Args(); cmd.Name() == "evalsha" && len(a) > 1 && (err == nil || err.Error()[:8] != "NOSCRIPT") {
			h.mu.Lock()
			sha, _ := a[1].(string)
			h.n[sha]++
			h.mu.Unlock()
		}
		return err
	}
}

func (h *scriptCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
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
		fx.c.AddHook(count)
		fx.sale("a", 10, 2, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it("a", 1))), nil, "Deduct held")
		is(t, fx.s.Deduct(fx.ctx(), ord("other", "u2", it("a", 2))), nil, "Deduct other")
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u3", it("a", 1))), nil, "Deduct paid")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm paid")
		fx.want("a", 6, 3, 1)
		hot, batch := count.calls(redisstock.HotScriptHash()), count.calls(redisstock.BatchScriptHash())
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
		// The blockers' call and the batch of six went through the hot
		// script; the three it left took one batch script call.
		if got := count.calls(redisstock.HotScriptHash()) - hot; got < 2 {
			t.Errorf("%d calls of the hot script, want the batches'", got)
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
// to the batch script, which answers them as repeats.
func TestHotBatchResentTakesOnce(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		h := &resendOnce{}
		fx.c.AddHook(h)
		h.mu.Lock()
		h.sha, h.left = redisstock.HotScriptHash(), 1
		h.mu.Unlock()
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct, its call sent twice")
		fx.want("a", 8, 2, 0)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert")
		fx.want("a", 10, 0, 0)
	})
}
