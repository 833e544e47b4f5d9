package sqlstock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// errHook is what the tests' Batch hook panics with.
var errHook = errors.New("test: the Batch hook panicked")

// outcome is what one Deduct did: its error, or the hook's panic.
type outcome struct {
	err      error
	panicked bool
}

// deductRecovering runs s.Deduct, recovering the hook's panic as an HTTP
// server recovers a handler's.
func deductRecovering(t *testing.T, ctx context.Context, s *sqlstock.Store, o stock.Order) (out outcome) {
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
// once, on the goroutine of one Deduct of its group (the caller that went
// alone, or the first still waiting), every other Deduct of the group
// returns its own outcome, and later Deducts all answer, with exact
// counts. (The Store used to keep the lane's in-flight slot of a
// transaction whose hook panicked: every later Deduct of the lane waited
// until its context ended, after one panic on SQLite, two elsewhere; a
// hook run on the Store's own goroutine ended the program.)
func TestGroupHookPanicLeavesStoreUsable(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			var on atomic.Bool
			var panics atomic.Int64
			obs := observe.Observer{Batch: func(context.Context, observe.Batch) {
				if on.Load() {
					panics.Add(1)
					panic(errHook)
				}
			}}
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Observer: obs})
			const units = 20
			if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: units}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // far past any answer here
			defer cancel()
			on.Store(true)

			// One Deduct at a time: the hook of each one's transaction
			// panics on its goroutine.
			var sent []stock.Order
			for i := range 3 {
				id := "seq" + strconv.Itoa(i)
				sent = append(sent, one(id, "u"+id, 1))
				if out := deductRecovering(t, ctx, s, sent[i]); !out.panicked {
					t.Fatalf("Deduct %s after %d panics: %v, want the hook's panic", id, i, out.err)
				}
			}

			// A group of several: six Deducts queue while the lane is
			// held, then leave in one transaction. The second asks for
			// more than there is.
			release := s.HoldLane("a")
			var orders []stock.Order
			outs := make([]outcome, 6)
			var wg sync.WaitGroup
			for i := range 6 {
				id := "q" + strconv.Itoa(i)
				qty := int64(1)
				if i == 1 {
					qty = 100
				}
				orders = append(orders, one(id, "u"+id, qty))
				wg.Go(func() { outs[i] = deductRecovering(t, ctx, s, orders[i]) })
				for s.Queued("a") < i+1 {
					if ctx.Err() != nil {
						t.Fatalf("Deduct %s never queued", id)
					}
					time.Sleep(time.Millisecond)
				}
			}
			release()
			wg.Wait()
			sent = append(sent, orders...)
			// q0, first in the group, reports it: the hook panics there.
			if !outs[0].panicked {
				t.Errorf("Deduct q0: %v, want the hook's panic", outs[0].err)
			}
			for i, want := range []error{stock.ErrSoldOut, nil, nil, nil, nil} {
				if outs[1+i].panicked {
					t.Errorf("Deduct %s panicked, want its outcome", orders[1+i].ID)
				} else if want == nil && outs[1+i].err != nil || want != nil && !errors.Is(outs[1+i].err, want) {
					t.Errorf("Deduct %s, in the group whose hook panicked: %v, want %v", orders[1+i].ID, outs[1+i].err, want)
				}
			}
			if n := panics.Load(); n != 4 {
				t.Fatalf("the hook panicked %d times, want 4 (3 alone, 1 group)", n)
			}

			// The hook quiet, many buyers at once: every Deduct answers,
			// and exactly the units left are taken.
			on.Store(false)
			const buyers = 40
			left := int64(units - 3 - 5)
			var took, soldOut atomic.Int64
			for i := range buyers {
				wg.Go(func() {
					id := "c" + strconv.Itoa(i)
					switch err := s.Deduct(ctx, one(id, "u"+id, 1)); {
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

			// Each order's repeat answers from the ledger: the Deducts
			// that answered got their real outcomes, and the ones that
			// panicked were decided all the same.
			for _, o := range sent {
				want := error(nil)
				if o.ID == "q1" {
					want = stock.ErrSoldOut
				}
				if err := s.Deduct(ctx, o); want == nil && err != nil || want != nil && !errors.Is(err, want) {
					t.Errorf("repeat of %s: %v, want %v", o.ID, err, want)
				}
			}
			if lv, err := s.Levels(ctx, "a"); err != nil || lv.Available != 0 || lv.Held != units {
				t.Fatalf("levels %+v, %v; want available 0, held %d", lv, err, units)
			}
		})
	}
}
