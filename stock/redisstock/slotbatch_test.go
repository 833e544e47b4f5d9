package redisstock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
)

// eachSlotBatched runs f on the Redis Cluster backends, where Deducts are
// batched per slot, with a gateHook on the client.
func eachSlotBatched(t *testing.T, f func(t *testing.T, fx *batchFixture)) {
	eachCluster(t, func(t *testing.T, fx *fixture) { f(t, newBatchFixture(fx)) })
}

// Buyers racing for one SKU on a Cluster, with a per-user limit: batched
// per slot, exactly the units on sale are taken, no user past the limit.
func TestClusterBatchExactCounts(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		const units, limit, users, orders = 100, 3, 40, 400
		fx.sale("a", units, limit, time.Minute)
		var ok atomic.Int64
		perUser := make([]atomic.Int64, users)
		errs := make(chan error, orders)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for n := next.Add(1); n <= orders; n = next.Add(1) {
					u := int(n) % users
					err := fx.s.Deduct(fx.ctx(), ord("o"+strconv.FormatInt(n, 10), "u"+strconv.Itoa(u), it("a", 1)))
					switch {
					case err == nil:
						ok.Add(1)
						perUser[u].Add(1)
					case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
					default:
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Deduct: %v", err)
		}
		if ok.Load() != units {
			t.Fatalf("%d Deducts took a unit, want %d", ok.Load(), units)
		}
		for u := range perUser {
			if n := perUser[u].Load(); n > limit {
				t.Fatalf("user u%d holds %d, past the limit %d", u, n, limit)
			}
		}
		fx.want("a", 0, units, 0)
		if calls := fx.gate.deducts.Load(); calls >= orders {
			t.Fatalf("%d deduct script calls for %d orders: nothing was batched", calls, orders)
		}
	})
}

// One batch on a Cluster with an order, its repeat, the same ID with other
// items, and another order: each gets its own outcome, the conflict (refused
// at its bind) takes nothing, and the batch is one deduct script call.
func TestClusterBatchConflictAndRepeatInOneCall(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		blockers := fx.block("a")
		orders := []stock.Order{
			ord("o1", "u1", it("a", 2)),
			ord("o1", "u1", it("a", 2)),
			ord("o1", "u1", it("a", 3)),
			ord("o2", "u2", it("a", 1)),
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
		is(t, errs[0], nil, "o1")
		is(t, errs[1], nil, "o1 repeated")
		is(t, errs[2], stock.ErrConflict, "o1 with other items")
		is(t, errs[3], nil, "o2")
		fx.want("a", 5, 5, 0)
		if n := fx.gate.deducts.Load(); n != 3 {
			t.Fatalf("%d deduct script calls, want 3 (two blockers, one batch)", n)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm o1")
		fx.want("a", 5, 3, 2)
	})
}

// A batch whose reply is lost gives every order in it an unknown outcome;
// the retries take each order once, the per-user counts included.
func TestClusterBatchLostReplyRetriesTakeOnce(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 20, 4, time.Minute)
		blockers := fx.block("a")
		orders := []stock.Order{ord("o1", "u1", it("a", 2)), ord("o2", "u1", it("a", 2)), ord("o3", "u2", it("a", 3))}
		errs := make([]error, len(orders))
		var wg sync.WaitGroup
		for i, o := range orders {
			fx.enqueue(fx.ctx(), o, i+1, &errs[i], &wg)
		}
		fx.gate.loseNext(1)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		lost := 0
		for _, err := range errs {
			if err != nil {
				unknown(t, err, "Deduct in a batch whose reply was lost")
				lost++
			}
		}
		if lost == 0 {
			t.Fatal("no Deduct lost its reply")
		}
		fx.want("a", 11, 9, 0)
		for _, o := range orders {
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "retried Deduct "+o.ID)
		}
		fx.want("a", 11, 9, 0)
		is(t, fx.s.Deduct(fx.ctx(), ord("o4", "u1", it("a", 1))), stock.ErrLimitReached, "Deduct past u1's limit")
		is(t, fx.s.Deduct(fx.ctx(), ord("o5", "u2", it("a", 1))), nil, "Deduct up to u2's limit")
	})
}

// A caller whose context ends while it is queued for its slot's batch
// leaves with nothing sent and nothing held, its order ID free.
func TestClusterBatchCallerCanceledWhileQueued(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
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
		is(t, fx.s.Deduct(fx.ctx(), ord("gone", "u3", it("a", 1))), nil, "Deduct of the freed ID with other items")
	})
}

// A batched deduct script that fails while it runs (here a key of the
// second order's second line holds another type) may have written before
// it failed: every order in it is told the outcome is unknown, never a
// plain error, and a retry of each takes its units once.
func TestClusterBatchScriptFailingMidwayIsAnUnknownOutcome(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		twin := ""
		for i := 0; twin == ""; i++ {
			if sku := "t" + strconv.Itoa(i); keyslot.Slot(sku) == keyslot.Slot("a") {
				twin = sku
			}
		}
		fx.sale(twin, 10, 0, time.Minute)
		if err := fx.c.Set(fx.ctx(), fx.s.LinesKey(twin), "not a hash", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		blockers := fx.block("a")
		errs := make([]error, 2)
		var wg sync.WaitGroup
		fx.enqueue(fx.ctx(), ord("o1", "u1", it("a", 2)), 1, &errs[0], &wg)
		fx.enqueue(fx.ctx(), ord("o2", "u2", it("a", 1), it(twin, 1)), 2, &errs[1], &wg)
		fx.gate.open()
		wg.Wait()
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		unknown(t, errs[0], "o1, in the call that failed")
		unknown(t, errs[1], "o2, whose line failed it")
		if err := fx.c.Del(fx.ctx(), fx.s.LinesKey(twin)).Err(); err != nil {
			t.Fatal(err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "o1 retried")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("a", 1), it(twin, 1))), nil, "o2 retried")
		fx.want("a", 5, 5, 0) // the blockers, o1 and o2 hold
		fx.want(twin, 9, 1, 0)
	})
}

// A Cluster Deduct whose caller leaves while its take is queued (its ID
// already bound) is answered with its context's error, nothing taken, and
// frees its order ID as a refused order does: the ID then takes other
// items.
func TestClusterBatchCallerLeavesAfterItsBind(t *testing.T) {
	eachSlotBatched(t, func(t *testing.T, fx *batchFixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		blockers := fx.block("a")
		ctx, cancel := context.WithCancel(fx.ctx())
		var err error
		var wg sync.WaitGroup
		fx.enqueue(ctx, ord("o1", "u1", it("a", 2)), 1, &err, &wg)
		cancel()
		waitFor(t, "the Deduct to leave the queue", func() bool { return fx.s.Queued() == 0 })
		fx.gate.open() // the entry is left by a script call, held at the gate too
		wg.Wait()
		if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct whose caller left while queued: %v, want context.Canceled, not an unknown outcome", err)
		}
		for _, err := range blockers() {
			is(t, err, nil, "blocker")
		}
		fx.want("a", 8, 2, 0) // the blockers' units only
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 1))), nil, "the ID with other items")
		fx.want("b", 9, 1, 0)
	})
}
