package redisstock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// gateHook holds script calls at a gate while it is closed, so that the
// next Deducts queue behind them, and can drop the reply of the next
// script calls that arrive while the gate is open. It counts the script
// calls that reached the server. On a Redis Cluster, where Deduct sends
// pipelines, it does the same to the pipelines that carry the deduct
// script, and counts those scripts in deducts.
type gateHook struct {
	mu      sync.Mutex
	gate    chan struct{} // non-nil: closed gate
	waiting int           // calls held at the gate
	lose    int           // drop the reply of this many next calls
	sent    atomic.Int64
	deducts atomic.Int64
}

func (h *gateHook) close() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *gateHook) open() {
	h.mu.Lock()
	close(h.gate)
	h.gate = nil
	h.mu.Unlock()
}

func (h *gateHook) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting
}

func (h *gateHook) loseNext(n int) {
	h.mu.Lock()
	h.lose = n
	h.mu.Unlock()
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		lose := h.pass()
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			h.sent.Add(1)
		}
		if lose {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}

// pass waits at the gate while it is closed, and reports whether the call
// is one whose reply to drop.
func (h *gateHook) pass() (lose bool) {
	h.mu.Lock()
	g := h.gate
	if g != nil {
		h.waiting++
	} else if h.lose > 0 {
		h.lose--
		lose = true
	}
	h.mu.Unlock()
	if g != nil {
		<-g
	}
	return lose
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "evalsha" &&
				(args[1] == redisstock.DeductScriptHash() || args[1] == redisstock.HotScriptHash() || args[1] == redisstock.OneScriptHash()) {
				n++
			}
		}
		if n == 0 {
			return next(ctx, cmds)
		}
		lose := h.pass()
		err := next(ctx, cmds)
		h.deducts.Add(int64(n))
		if lose {
			for _, c := range cmds {
				c.SetErr(errLostReply)
			}
			return errLostReply
		}
		return err
	}
}

// batchFixture is a batching Store with a gateHook on its client.
type batchFixture struct {
	*fixture
	gate *gateHook
	// answered counts the enqueued Deducts answered without queuing (on a
	// Cluster, an order its bind refused: a conflict takes nothing).
	answered int
}

// newBatchFixture adds a gateHook to fx's client, once the Store's
// scripts are loaded (see loadScripts: the hook holds and counts script
// calls).
func newBatchFixture(fx *fixture) *batchFixture {
	fx.t.Helper()
	fx.loadScripts()
	g := &gateHook{}
	fx.c.AddHook(g)
	return &batchFixture{fixture: fx, gate: g}
}

// eachBatched runs f on the backends where Deducts are batched (not on a
// cluster).
func eachBatched(t *testing.T, f func(t *testing.T, fx *batchFixture)) {
	for _, b := range backends() {
		if strings.Contains(b.name, "cluster") {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			fx := newFixture(t, b)
			f(t, newBatchFixture(fx))
		})
	}
}

// waitFor polls cond until it holds (the test fails after 10s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// block fills every in-flight slot of the Store with a Deduct held at the
// closed gate, so the next Deducts queue. The returned wait gives the
// blockers' errors once the gate opens.
func (fx *batchFixture) block(sku string) func() []error {
	fx.t.Helper()
	fx.gate.close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = fx.s.Deduct(fx.ctx(), ord("blocker"+strconv.Itoa(i), "blocker", it(sku, 1)))
		})
	}
	waitFor(fx.t, "two Deducts held at the gate", func() bool { return fx.gate.held() == 2 })
	return func() []error { wg.Wait(); return errs }
}

// enqueue starts Deduct of o and waits until it is queued (the n-th).
func (fx *batchFixture) enqueue(ctx context.Context, o stock.Order, n int, out *error, wg *sync.WaitGroup) {
	fx.t.Helper()
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		*out = fx.s.Deduct(ctx, o)
	})
	waitFor(fx.t, "a queued Deduct", func() bool {
		select {
		case <-done: // answered before its take was queued
			fx.answered++
			return true
		default:
			return fx.s.Queued() == n-fx.answered
		}
	})
}

func TestBatchExactCounts(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		skus := []string{"k0", "k1", "k2"}
		const units, limit, users = 100, 3, 50
		for _, sku := range skus {
			fx.sale(sku, units, limit, time.Minute)
		}
		fx.sale("solo", units, 0, time.Minute)
		const orders = 400
		var mu sync.Mutex
		took := map[string]int64{}    // sku -> units of successful orders
		perUser := map[string]int64{} // sku/user -> units
		var soloOK atomic.Int64
		var wg sync.WaitGroup
		for i := range orders {
			wg.Go(func() {
				user := "u" + strconv.Itoa(i%users)
				items := []stock.Item{it(skus[i%3], 1)}
				if i%2 == 1 {
					items = append(items, it(skus[(i+1)%3], 1))
				}
				err := fx.s.Deduct(fx.ctx(), ord("o"+strconv.Itoa(i), user, items...))
				if err != nil && !errors.Is(err, stock.ErrSoldOut) && !errors.Is(err, stock.ErrLimitReached) {
					t.Errorf("Deduct: %v", err)
				}
				if err == nil {
					mu.Lock()
					for _, x := range items {
						took[x.SKU] += x.Qty
						perUser[x.SKU+"/"+user] += x.Qty
					}
					mu.Unlock()
				}
				// Single-line orders for one SKU, more than it has.
				if fx.s.Deduct(fx.ctx(), ord("s"+strconv.Itoa(i), user, it("solo", 1))) == nil {
					soloOK.Add(1)
				}
			})
		}
		wg.Wait()
		for _, sku := range skus {
			fx.want(sku, units-took[sku], took[sku], 0)
		}
		for k, n := range perUser {
			if n > limit {
				t.Fatalf("%s holds %d units, above the limit of %d", k, n, limit)
			}
		}
		if soloOK.Load() != units {
			t.Fatalf("%d single-line orders of %d units succeeded", soloOK.Load(), units)
		}
		fx.want("solo", 0, units, 0)
	})
}

func TestBatchConflictAndRepeatInOneCall(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 5, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		blockers := fx.block("a")
		var wg sync.WaitGroup
		errs := make([]error, 5)
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 2)), 1, &errs[0], &wg)
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 2)), 2, &errs[1], &wg)             // repeat
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 2), it("b", 1)), 3, &errs[2], &wg) // conflict
		fx.enqueue(fx.ctx(), ord("o2", "u1", it("a", 3)), 4, &errs[3], &wg)             // limit: 2 + 3 fits 5
		fx.enqueue(fx.ctx(), ord("o3", "u1", it("a", 1), it("b", 1)), 5, &errs[4], &wg) // limit reached
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		is(t, errs[0], nil, "Deduct o1")
		is(t, errs[1], nil, "repeated Deduct o1")
		is(t, errs[2], stock.ErrConflict, "o1 with other items")
		is(t, errs[3], nil, "Deduct o2")
		is(t, errs[4], stock.ErrLimitReached, "Deduct o3")
		if n := fx.gate.sent.Load(); n != 3 {
			t.Fatalf("%d script calls, want 3 (two blockers, one batch)", n)
		}
		fx.want("a", 3, 7, 0)
		fx.want("b", 10, 0, 0)
		// o3 left nothing behind: its ID is free.
		is(t, fx.s.Revert(fx.ctx(), "o3"), stock.ErrUnknownOrder, "Revert of the refused o3")
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u1", it("b", 1))), nil, "o3 reused for other items")
		fx.want("a", 5, 5, 0)
		fx.want("b", 9, 1, 0)
	})
}

func TestBatchCallerCanceledWhileQueued(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		blockers := fx.block("a")
		ctx, cancel := context.WithCancel(fx.ctx())
		var wg sync.WaitGroup
		var canceled, kept error
		fx.enqueue(ctx, ord("gone", "u1", it("a", 3)), 1, &canceled, &wg)
		fx.enqueue(fx.ctx(), ord("kept", "u2", it("a", 2)), 2, &kept, &wg)
		cancel()
		waitFor(t, "the canceled caller to leave the queue", func() bool { return fx.s.Queued() == 1 })
		fx.gate.open()
		wg.Wait()
		if !errors.Is(canceled, context.Canceled) || errors.Is(canceled, stock.ErrUnknownOutcome) || stock.IsBusiness(canceled) {
			t.Fatalf("canceled while queued: %v, want context.Canceled with a known outcome", canceled)
		}
		is(t, kept, nil, "queued Deduct behind the canceled one")
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		fx.want("a", 6, 4, 0)
		is(t, fx.s.Revert(fx.ctx(), "gone"), stock.ErrUnknownOrder, "Revert of the canceled order")
	})
}

func TestBatchLostReplyRetriesTakeOnce(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 20, 4, time.Minute)
		fx.sale("b", 20, 0, time.Minute)
		blockers := fx.block("b")
		orders := []stock.Order{
			ord("o1", "u1", it("a", 2)),
			ord("o2", "u1", it("a", 2), it("b", 1)),
			ord("o3", "u2", it("a", 3)),
			ord("o4", "", it("b", 5)),
		}
		var wg sync.WaitGroup
		errs := make([]error, len(orders))
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &errs[i], &wg)
		}
		fx.gate.loseNext(1)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		for _, err := range errs {
			unknown(t, err, "Deduct in a batch whose reply was lost")
		}
		fx.want("a", 13, 7, 0)
		for _, o := range orders {
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "retried Deduct "+o.ID)
		}
		fx.want("a", 13, 7, 0)
		fx.want("b", 12, 8, 0)
		// u1's quota was counted once: 2 + 2 reached the limit of 4.
		is(t, fx.s.Deduct(fx.ctx(), ord("o5", "u1", it("a", 1))), stock.ErrLimitReached, "Deduct past u1's limit")
		is(t, fx.s.Deduct(fx.ctx(), ord("o6", "u2", it("a", 1))), nil, "Deduct up to u2's limit")
	})
}

func TestConformanceUnbatched(t *testing.T) {
	for _, b := range backends() {
		if strings.Contains(b.name, "cluster") {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
				c, _ := b.client(t)
				return newStore(t, c, redisstock.Config{Clock: clock, MaxBatch: 1})
			})
		})
	}
}

// A batch of new orders beside repeats of earlier ones (held, closed), an
// ID already bound to other items and a conflicting line: the batch reads
// the earlier records and entries, and each order gets its own outcome.
func TestBatchBesideEarlierOrders(t *testing.T) {
	eachBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it("a", 1))), nil, "Deduct o2")
		is(t, fx.s.Revert(fx.ctx(), "o2"), nil, "Revert o2")
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u1", it("b", 1))), nil, "Deduct o3")
		before := fx.gate.sent.Load()
		blockers := fx.block("b")
		orders := []stock.Order{
			ord("o1", "u1", it("a", 2)), // repeat of a held order
			ord("o2", "u1", it("a", 1)), // repeat of a reverted one
			ord("o3", "u1", it("a", 1)), // the ID names b: conflict at the entry
			ord("o4", "u2", it("a", 3)), // new
			ord("o1", "u1", it("a", 5)), // conflict at the line's record
		}
		want := []error{nil, stock.ErrOrderClosed, stock.ErrConflict, nil, stock.ErrConflict}
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
		for i := range orders {
			is(t, errs[i], want[i], "Deduct "+orders[i].ID+" in the batch")
		}
		if n := fx.gate.sent.Load() - before; n != 3 {
			t.Fatalf("%d script calls, want 3 (two blockers, one batch)", n)
		}
		fx.want("a", 5, 5, 0)
		fx.want("b", 7, 3, 0)
	})
}
