package redisstock_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Revert of an order on two slots whose Deduct is between its slot
// groups reverts the group taken and closes the other; the Deduct's take
// of that group then finds the order closed. When that take runs between
// the Revert's release step and its end of the entry, its attempt leaves
// the order's directory entry without deleting it (the order ended), and
// the Revert ends it: a repeated Revert answers nil, Confirm
// stock.ErrOrderClosed, and Orders reads the order reverted. The attempt,
// the last on the live entry, deleted it.
func TestClusterClosedTakeKeepsTheEntryOfARevertedOrder(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		// Warm the scripts up (no NOSCRIPT round trip repeats a call).
		is(t, fx.s.Deduct(fx.ctx(), ord("w", "u0", it(lo, 1), it(hi, 1))), nil, "warm-up order")
		is(t, fx.s.Revert(fx.ctx(), "w"), nil, "warm-up revert")

		ht := holdTake(fx.c, "x", 2) // x's take of hi (its second slot group)
		eh := holdArg(fx.c, "end")   // the Revert's end of x's directory entry
		dd := make(chan error, 1)
		go func() { dd <- fx.s.Deduct(context.Background(), ord("x", "u1", it(lo, 3), it(hi, 2))) }()
		ht.heldNow(t)
		fx.want(lo, 7, 3, 0)
		rd := make(chan error, 1)
		go func() { rd <- fx.s.Revert(context.Background(), "x") }()
		eh.heldNow(t) // lo reverted, hi closed; the entry not yet ended
		fx.want(lo, 10, 0, 0)
		ht.let()
		is(t, <-dd, stock.ErrOrderClosed, "Deduct of x, reverted between its slot groups")
		eh.let()
		is(t, <-rd, nil, "Revert of x between its slot groups")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)

		got, err := fx.s.Orders(fx.ctx(), []string{"x"})
		if err != nil || got[0].State != stock.StateReverted {
			t.Errorf("Orders of x after its Revert answered nil: %+v, %v; want it reverted", got, err)
		}
		if err := fx.s.Confirm(fx.ctx(), "x"); !errors.Is(err, stock.ErrOrderClosed) {
			t.Errorf("Confirm of x after its Revert answered nil: %v, want ErrOrderClosed", err)
		}
		if err := fx.s.Revert(fx.ctx(), "x"); err != nil {
			t.Errorf("repeated Revert of x: %v, want nil", err)
		}
	})
}

// The same through a lost reply: a Revert between a Deduct's slot groups
// writes (lo reverted, hi closed) but its reply is lost before it ends
// the entry, and the Deduct's take of hi is refused closed meanwhile. The
// resent Revert (as stock.ErrUnknownOutcome asks) finds the order and
// answers nil.
func TestClusterResentRevertAfterAClosedTakeFindsTheOrder(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("w", "u0", it(lo, 1), it(hi, 1))), nil, "warm-up order")
		is(t, fx.s.Revert(fx.ctx(), "w"), nil, "warm-up revert")

		ht := holdTake(fx.c, "x", 2) // x's take of hi (its second slot group)
		dd := make(chan error, 1)
		go func() { dd <- fx.s.Deduct(context.Background(), ord("x", "u1", it(lo, 3), it(hi, 2))) }()
		ht.heldNow(t)
		fx.want(lo, 7, 3, 0)
		fx.hook.arm(0, 1, false) // the Revert's release step runs, its reply is lost
		unknown(t, fx.s.Revert(fx.ctx(), "x"), "Revert of x whose reply was lost")
		fx.hook.arm(0, 0, false)
		fx.want(lo, 10, 0, 0)
		ht.let()
		is(t, <-dd, stock.ErrOrderClosed, "Deduct of x, reverted between its slot groups")
		if err := fx.s.Revert(fx.ctx(), "x"); err != nil {
			t.Errorf("Revert of x resent after its lost reply: %v, want nil", err)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// A race inside one Deduct call: an order whose line of a SKU in buckets
// finds its bucket short is refused there, undoes its first slot group
// and leaves the entry, has the bucket refilled, and tries again. A
// Revert that read the order between the first attempt's slot groups, and
// whose step found it holding nothing, answers stock.ErrUnknownOrder and
// takes back its records of no units, so the second attempt takes: no
// call reverted the order.
func TestClusterBucketRefillRetryAfterARevertThatFoundNothing(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		hi := "hb"
		names := redisstock.BucketNames(hi, 2)
		home := 0
		if keyslot.Slot(names[1]) > keyslot.Slot(names[0]) {
			home = 1
		}
		user := usersIn(2, home, 1, "u")[0]
		lo := ""
		for i := 0; lo == ""; i++ {
			if c := "lo" + strconv.Itoa(i); keyslot.Slot(c) < keyslot.Slot(names[home]) && keyslot.Slot(c) != keyslot.Slot(names[1-home]) {
				lo = c
			}
		}
		fx.sale(lo, 10, 0, time.Minute)
		fx.bucketSale(hi, 4, 0, time.Minute, 2) // 2 units in each bucket
		// Warm the scripts up (no NOSCRIPT round trip repeats a call).
		is(t, fx.s.Deduct(fx.ctx(), ord("w", user, it(lo, 1), it(hi, 1))), nil, "warm-up order")
		is(t, fx.s.Revert(fx.ctx(), "w"), nil, "warm-up revert")

		first := holdTake(fx.c, "x", 2)  // attempt 1's take of x's bucket of hi
		second := holdTake(fx.c, "x", 3) // attempt 2's take of lo
		rh := holdArg(fx.c, "close")     // the Revert's release step
		dd := make(chan error, 1)
		go func() { dd <- fx.s.Deduct(context.Background(), ord("x", user, it(lo, 3), it(hi, 3))) }()
		first.heldNow(t)
		fx.want(lo, 7, 3, 0)
		rd := make(chan error, 1)
		go func() { rd <- fx.s.Revert(context.Background(), "x") }()
		rh.heldNow(t) // the Revert read lo held, the bucket's line without a record
		first.let()   // short bucket: undo lo, leave the entry, refill
		second.heldNow(t)
		fx.want(lo, 10, 0, 0)
		rh.let()
		rerr := <-rd
		is(t, rerr, stock.ErrUnknownOrder, "Revert of x while its first attempt was undone")
		second.let()
		if err := <-dd; err != nil {
			t.Fatalf("Deduct of x (the concurrent Revert answered %v: no call reverted x): %v, want nil", rerr, err)
		}
		fx.want(lo, 7, 3, 0)
		fx.want(hi, 1, 3, 0)
	})
}
