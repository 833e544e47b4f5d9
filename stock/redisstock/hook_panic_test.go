package redisstock_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// errHook is what the tests' Batch hook panics with.
var errHook = errors.New("test: the Batch hook panicked")

// panicky is an Observer whose Batch hook panics with errHook while on is
// set.
type panicky struct {
	on     atomic.Bool
	panics atomic.Int64 // hook calls that panicked
}

func (p *panicky) observer() observe.Observer {
	return observe.Observer{Batch: func(context.Context, observe.Batch) {
		if p.on.Load() {
			p.panics.Add(1)
			panic(errHook)
		}
	}}
}

// outcome is what one Deduct did: its error, or the hook's panic.
type outcome struct {
	err      error
	panicked bool
}

// deductRecovering runs s.Deduct, recovering the hook's panic as an HTTP
// server recovers a handler's.
func deductRecovering(t *testing.T, ctx context.Context, s *redisstock.Store, o stock.Order) (out outcome) {
	defer func() {
		if p := recover(); p != nil {
			if p != errHook {
				t.Errorf("Deduct %s panicked with %v, want the hook's value", o.ID, p)
			}
			out.panicked = true
		}
	}()
	return outcome{err: s.Deduct(ctx, o)}
}

// A Batch hook that panics leaves the Store usable: each panic surfaces
// once, on the goroutine of one Deduct of its batch (the caller that sent
// it, or the first still waiting), every other Deduct of the batch returns
// its own outcome, and later Deducts all answer, with exact counts. (The
// Store used to keep the in-flight slot of a batch whose hook panicked:
// after two, every Deduct waited until its context ended; a hook run on
// the Store's own goroutine ended the program.)
func TestBatchHookPanicLeavesStoreUsable(t *testing.T) {
	run := func(t *testing.T, fx *batchFixture) {
		var hook panicky
		cfg := fx.cfg
		cfg.Observer = hook.observer()
		fx.s = newStore(t, fx.c, cfg)
		const units = 20
		fx.sale("a", units, 0, time.Minute)
		ctx, cancel := context.WithTimeout(fx.ctx(), 10*time.Second) // far past any answer here
		defer cancel()
		hook.on.Store(true)

		// One Deduct at a time: the hook of each one's batch panics on its
		// goroutine.
		var sent []stock.Order
		for i := range 3 {
			id := "seq" + strconv.Itoa(i)
			sent = append(sent, ord(id, "u"+id, it("a", 1)))
			if out := deductRecovering(t, ctx, fx.s, sent[i]); !out.panicked {
				t.Fatalf("Deduct %s after %d panics: %v, want the hook's panic", id, i, out.err)
			}
		}

		// A batch of several: two Deducts hold both in-flight slots at the
		// gate, six queue behind them and leave in one batch. The second of
		// the six asks for more than there is.
		fx.gate.close()
		orders := []stock.Order{ord("blocker0", "b0", it("a", 1)), ord("blocker1", "b1", it("a", 1))}
		outs := make([]outcome, 8)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { outs[i] = deductRecovering(t, ctx, fx.s, orders[i]) })
		}
		waitFor(t, "two Deducts held at the gate", func() bool { return fx.gate.held() == 2 })
		for i := range 6 {
			id := "q" + strconv.Itoa(i)
			qty := int64(1)
			if i == 1 {
				qty = 100
			}
			orders = append(orders, ord(id, "u"+id, it("a", qty)))
			wg.Go(func() { outs[2+i] = deductRecovering(t, ctx, fx.s, orders[2+i]) })
			waitFor(t, "a queued Deduct", func() bool { return fx.s.Queued() == i+1 })
		}
		fx.gate.open()
		wg.Wait()
		sent = append(sent, orders...)
		for i, o := range orders {
			// Each blocker sent its batch of one and q0, first in its
			// batch, reports it: the hook panics on their goroutines.
			if want := i <= 2; outs[i].panicked != want {
				t.Errorf("Deduct %s: panicked %v, want %v (error %v)", o.ID, outs[i].panicked, want, outs[i].err)
			}
		}
		for i, want := range []error{stock.ErrSoldOut, nil, nil, nil, nil} {
			is(t, outs[3+i].err, want, "Deduct "+orders[3+i].ID+", in the batch whose hook panicked")
		}
		if n := hook.panics.Load(); n != 6 {
			t.Fatalf("the hook panicked %d times, want 6 (3 alone, 2 blockers, 1 batch)", n)
		}

		// The hook quiet, many buyers at once: every Deduct answers, and
		// exactly the units left are taken.
		hook.on.Store(false)
		const buyers = 40
		left := int64(units - 3 - 2 - 5)
		var took, soldOut atomic.Int64
		for i := range buyers {
			wg.Go(func() {
				id := "c" + strconv.Itoa(i)
				switch err := fx.s.Deduct(ctx, ord(id, "u"+id, it("a", 1))); {
				case err == nil:
					took.Add(1)
				case errors.Is(err, stock.ErrSoldOut):
					soldOut.Add(1)
				default:
					t.Errorf("Deduct %s: %v", id, err)
				}
			})
		}
		wg.Wait()
		if took.Load() != left || soldOut.Load() != buyers-left {
			t.Fatalf("%d Deducts took a unit and %d were sold out, want %d and %d", took.Load(), soldOut.Load(), left, buyers-left)
		}
		fx.want("a", 0, units, 0)

		// Each order's repeat answers from what it did: the Deducts that
		// answered got their real outcomes, and the ones that panicked were
		// decided all the same.
		for _, o := range sent {
			want := error(nil)
			if o.ID == "q1" {
				want = stock.ErrSoldOut
			}
			is(t, fx.s.Deduct(ctx, o), want, "repeat of "+o.ID)
		}
		fx.want("a", 0, units, 0)
	}
	t.Run("server", func(t *testing.T) { eachBatched(t, run) })
	t.Run("cluster", func(t *testing.T) { eachSlotBatched(t, run) })
}

// A batch whose callers have all left (their contexts ended while it ran)
// is reported on the Store's own goroutine, where no caller can recover
// the hook's panic: it ends the program, as observe's doc says, rather
// than being lost. The test runs itself in a child process to see that.
func TestBatchHookPanicWithNoCallerLeftEndsTheProgram(t *testing.T) {
	const child = "STOCKGUARD_TEST_HOOK_PANIC_CHILD"
	if os.Getenv(child) == "1" {
		noCallerLeft(t)
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBatchHookPanicWithNoCallerLeftEndsTheProgram$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child process: %v, want it to end with the hook's panic\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("panic: "+errHook.Error())) || !bytes.Contains(out, []byte("redisstock.(*batcher).drain")) {
		t.Fatalf("the child process ended without the hook's panic on the Store's goroutine:\n%s", out)
	}
}

// noCallerLeft reports a batch whose two callers have left with a hook
// that panics on it: the program ends before it returns.
func noCallerLeft(t *testing.T) {
	fx := newFixture(t, backends()[0]) // miniredis, one server
	cfg := fx.cfg
	cfg.Observer = observe.Observer{Batch: func(_ context.Context, b observe.Batch) {
		if b.Size == 2 {
			panic(errHook)
		}
	}}
	fx.s = newStore(t, fx.c, cfg)
	bf := newBatchFixture(fx)
	gate := bf.gate
	bf.sale("a", 10, 0, time.Minute)
	blockers := bf.block("a")
	ctx, cancel := context.WithCancel(fx.ctx())
	errs := make([]error, 2)
	var wg sync.WaitGroup
	bf.enqueue(ctx, ord("x", "ux", it("a", 1)), 1, &errs[0], &wg)
	bf.enqueue(ctx, ord("y", "uy", it("a", 1)), 2, &errs[1], &wg)
	// Let the blockers through and hold the next script call, the batch of
	// x and y, at a new gate.
	gate.mu.Lock()
	held := gate.gate
	gate.gate = make(chan struct{})
	gate.mu.Unlock()
	close(held)
	blockers()
	waitFor(t, "the batch of x and y at the gate", func() bool { return gate.held() == 3 })
	cancel()
	wg.Wait()
	for _, err := range errs {
		unknown(t, err, "a Deduct that left its batch")
	}
	gate.open()
	time.Sleep(10 * time.Second) // the program ends meanwhile
	t.Fatal("the hook's panic on the Store's goroutine did not end the program")
}
