package redisstock_test

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// errLostReply is what a client sees when the reply never comes back.
var errLostReply = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// faultHook wraps a client's commands. While armed, it either sends a call
// carrying a script and then drops the reply (the script ran, the client
// sees a timeout), or, with skip set, fails the call without sending it.
// Calls without a script that writes pass through (the reclaimer's peeks
// of the hold queues are a read-only script).
type faultHook struct {
	mu    sync.Mutex
	after int  // let this many script calls through first
	left  int  // then hit this many
	skip  bool // fail without sending (a crash before the call)
}

func (h *faultHook) arm(after, n int, skip bool) {
	h.mu.Lock()
	h.after, h.left, h.skip = after, n, skip
	h.mu.Unlock()
}

// hit reports whether this call is one to break, and how; counted, whether
// it is one of the script calls let through first.
func (h *faultHook) hit(cmds []redis.Cmder) (hit, skip, counted bool) {
	scripted := false
	for _, c := range cmds {
		if name := c.Name(); (name == "evalsha" || name == "eval") && !queuePeek(c) {
			scripted = true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !scripted || h.left == 0 {
		return false, false, false
	}
	if h.after > 0 {
		h.after--
		return false, false, true
	}
	h.left--
	return true, h.skip, false
}

// queuePeek reports whether c runs stock_queue_peek.lua.
func queuePeek(c redis.Cmder) bool {
	args := c.Args()
	if len(args) < 2 {
		return false
	}
	body, _ := args[1].(string)
	if c.Name() == "eval" {
		body = fmt.Sprintf("%x", sha1.Sum([]byte(body)))
	}
	return body == redisstock.QueuePeekScriptHash()
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		hit, skip, counted := h.hit([]redis.Cmder{cmd})
		if hit && skip {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		err := next(ctx, cmd)
		if (hit || counted) && (noScript(cmd) || err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")) {
			h.unhit(hit) // never ran: the client sends it again (as EVAL)
			return err
		}
		if hit {
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}

// noScript reports whether any of cmds was refused as NOSCRIPT (a script
// the server did not have yet, on a server that had not run it before).
func noScript(cmds ...redis.Cmder) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// unhit gives back a call that never ran (NOSCRIPT): a hit, or one of the
// calls let through first. The call the client sends again in its place
// (an EVAL, or the pipeline again once the script is loaded) is counted.
func (h *faultHook) unhit(hit bool) {
	h.mu.Lock()
	if hit {
		h.left++
	} else {
		h.after++
	}
	h.mu.Unlock()
}

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		hit, skip, counted := h.hit(cmds)
		var err error
		if !hit || !skip {
			err = next(ctx, cmds)
		}
		if (hit && !skip || counted) && noScript(cmds...) {
			h.unhit(hit)
			return err
		}
		if hit {
			for _, c := range cmds {
				c.SetErr(errLostReply)
			}
			return errLostReply
		}
		return err
	}
}

// fixture is one Store on one backend, with its clock, client and hook.
type fixture struct {
	t     *testing.T
	s     *redisstock.Store
	c     redis.UniversalClient
	mini  *miniredis.Miniredis // nil on a real server
	clock *stocktest.Clock
	hook  *faultHook
	cfg   redisstock.Config
}

func newFixture(t *testing.T, b backend) *fixture {
	c, m := b.client(t)
	h := &faultHook{}
	c.AddHook(h)
	clock := stocktest.NewClock(stocktest.Epoch)
	cfg := redisstock.Config{Prefix: uniquePrefix(t), Clock: clock}
	return &fixture{t: t, s: newStore(t, c, cfg), c: c, mini: m, clock: clock, hook: h, cfg: cfg}
}

// each runs f on every backend.
func each(t *testing.T, f func(t *testing.T, fx *fixture)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, newFixture(t, b)) })
	}
}

// eachMini runs f on the miniredis backends (time can be fast-forwarded).
func eachMini(t *testing.T, f func(t *testing.T, fx *fixture)) {
	for _, b := range backends() {
		if strings.HasPrefix(b.name, "miniredis") {
			t.Run(b.name, func(t *testing.T) { f(t, newFixture(t, b)) })
		}
	}
}

// eachCluster runs f on the backends that group lines by slot.
func eachCluster(t *testing.T, f func(t *testing.T, fx *fixture)) {
	for _, b := range backends() {
		if strings.Contains(b.name, "cluster") {
			t.Run(b.name, func(t *testing.T) { f(t, newFixture(t, b)) })
		}
	}
}

func (fx *fixture) ctx() context.Context { return fx.t.Context() }

func (fx *fixture) sale(sku string, units, perUser int64, hold time.Duration) {
	fx.t.Helper()
	if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: sku, Units: units, PerUserLimit: perUser, HoldTTL: hold}); err != nil {
		fx.t.Fatal(err)
	}
}

// loadScripts loads every script of the Store on fx's servers, for a test
// whose hook counts or matches script calls by their SHA1 before they are
// sent: a server that lacks a script answers its EVALSHA NOSCRIPT, and the
// Store sends the call again (as EVAL, or once the script is loaded), so
// the hook would see one call twice, or not by its SHA1.
func (fx *fixture) loadScripts() {
	fx.t.Helper()
	if err := fx.s.LoadAllScripts(fx.ctx()); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) want(sku string, avail, held, sold int64) {
	fx.t.Helper()
	lv, err := fx.s.Levels(fx.ctx(), sku)
	if err != nil {
		fx.t.Fatal(err)
	}
	if lv.Available != avail || lv.Held != held || lv.Sold != sold {
		fx.t.Fatalf("%s: available/held/sold = %d/%d/%d, want %d/%d/%d",
			sku, lv.Available, lv.Held, lv.Sold, avail, held, sold)
	}
}

func is(t *testing.T, err, target error, what string) {
	t.Helper()
	if target == nil && err != nil || target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// unknown checks that err is an unknown outcome, not a business one.
func unknown(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
		t.Fatalf("%s: error %v, want an unknown outcome", what, err)
	}
}

func ord(id, user string, items ...stock.Item) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: items}
}

func it(sku string, qty int64) stock.Item { return stock.Item{SKU: sku, Qty: qty} }

func TestLostReplyRetryTakesOnce(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 3, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		o := ord("o1", "u1", it("a", 2), it("b", 1))

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.Deduct(fx.ctx(), o), "Deduct with a lost reply")
		if held(t, fx, "a")+held(t, fx, "b") == 0 {
			t.Fatal("the script did not run before its reply was dropped")
		}
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "retried Deduct")
		fx.want("a", 8, 2, 0)
		fx.want("b", 9, 1, 0)
		// The user's quota was counted once: 2 + 1 fits the limit of 3.
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it("a", 1))), nil, "Deduct up to the limit")
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u1", it("a", 1))), stock.ErrLimitReached, "Deduct past the limit")

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm with a lost reply")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "retried Confirm")
		fx.want("a", 7, 1, 2)
		fx.want("b", 9, 0, 1)

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.Revert(fx.ctx(), "o1"), "Revert with a lost reply")
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "retried Revert")
		fx.want("a", 9, 1, 0)
		fx.want("b", 10, 0, 0)

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "op-11", SKU: "b", Units: 5}), "Restock with a lost reply")
		fx.want("b", 15, 0, 0)
	})
}

func TestCanceledContext(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		ctx, cancel := context.WithCancel(fx.ctx())
		cancel()
		for what, err := range map[string]error{
			"Deduct":    fx.s.Deduct(ctx, ord("o1", "", it("a", 1))),
			"Confirm":   fx.s.Confirm(ctx, "o1"),
			"Revert":    fx.s.Revert(ctx, "o1"),
			"PutOnSale": fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}),
		} {
			if !errors.Is(err, context.Canceled) || stock.IsBusiness(err) {
				t.Fatalf("%s with a canceled context: %v", what, err)
			}
		}
		_, err := fx.s.Available(ctx, "a")
		is(t, err, context.Canceled, "Available with a canceled context")
		fx.want("a", 10, 0, 0)
	})
}

func TestScriptCacheFlushed(t *testing.T) {
	// On miniredis only: flushing a shared server's script cache would
	// disturb the other tests.
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, 0)
		fx.sale("b", 10, 0, 0)
		if err := fx.c.ScriptFlush(fx.ctx()).Err(); err != nil {
			t.Fatal(err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it("a", 1), it("b", 2))), nil, "Deduct after SCRIPT FLUSH")
		fx.want("a", 9, 1, 0)
		fx.want("b", 8, 2, 0)
	})
}

func TestCrossSlotSoldOutUndoesEarlierSlots(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 2, time.Minute)
		fx.sale(hi, 1, 0, time.Minute)
		o := ord("o1", "u1", it(hi, 2), it(lo, 2))
		err := fx.s.Deduct(fx.ctx(), o)
		var se *stock.SKUError
		if !errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &se) || se.SKU != hi {
			t.Fatalf("Deduct: %v, want sold out naming %s", err, hi)
		}
		fx.want(lo, 10, 0, 0) // the earlier slot was taken, then undone
		fx.want(hi, 1, 0, 0)
		is(t, fx.s.Revert(fx.ctx(), "o1"), stock.ErrUnknownOrder, "Revert of the refused order")
		// The quota came back with the units, and the order ID is free.
		if err := fx.s.Restock(fx.ctx(), stock.Restock{OpID: "op-12", SKU: hi, Units: 1}); err != nil {
			t.Fatal(err)
		}
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct after restock")
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 0, 2, 0)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
		fx.want(lo, 8, 0, 2)
		fx.want(hi, 0, 0, 2)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Refund")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 2, 0, 0)
	})
}

func TestCrossSlotConflictUndoes(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(hi, 1))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 3), it(hi, 1))), stock.ErrConflict, "same ID, extra line")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 9, 1, 0)
	})
}

func TestCrashBetweenSlotsLeavesNothingHeld(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		// The first slot's script runs; the process dies before the second.
		fx.hook.arm(1, 1, true)
		unknown(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 3))), "Deduct dying between slots")
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 10, 0, 0)
		// A half-taken order cannot be confirmed, and confirming changes
		// nothing.
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrUnknownOrder, "Confirm of a half-taken order")
		fx.want(lo, 8, 2, 0)
		fx.clock.Advance(time.Minute)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(got) != 1 || got[0] != (stock.Reclaimed{OrderID: "o1", UserID: "u1", SKU: lo, Qty: 2}) {
			t.Fatalf("ReclaimExpired = %+v, %v", got, err)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

func TestCrossSlotLateConfirmReturnsEveryLine(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 2*time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 3))), nil, "Deduct")
		fx.clock.Advance(time.Minute) // hi's hold is due, lo's is not
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrHoldExpired, "late Confirm")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert of an expired order")
		fx.want(lo, 10, 0, 0)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("ReclaimExpired = %+v, %v; want nothing", got, err)
		}
	})
}

func held(t *testing.T, fx *fixture, sku string) int64 {
	t.Helper()
	lv, err := fx.s.Levels(fx.ctx(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return lv.Held
}

// skusInSlotOrder returns two SKUs in different slots, lower slot first.
func skusInSlotOrder(t *testing.T, fx *fixture) (string, string) {
	a, b := "sku-a", "sku-b"
	sa, sb := keyslot.Slot(a), keyslot.Slot(b)
	if sa == sb {
		t.Fatalf("%s and %s share slot %d", a, b, sa)
	}
	if sa > sb {
		a, b = b, a
	}
	return a, b
}

func TestConcurrentReclaimersExactCounts(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		skus := []string{"r0", "r1", "r2", "r3", "r4"}
		for _, sku := range skus {
			fx.sale(sku, 200, 0, time.Minute)
		}
		const orders = 200
		for i := range orders {
			o := ord("o"+strconv.Itoa(i), "u"+strconv.Itoa(i%7), it(skus[i%5], 1), it(skus[(i+2)%5], 2))
			is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		}
		for i := 0; i < orders; i += 4 {
			is(t, fx.s.Confirm(fx.ctx(), "o"+strconv.Itoa(i)), nil, "Confirm")
		}
		fx.clock.Advance(time.Minute)
		var units atomic.Int64
		var seen sync.Map
		record := func(got []stock.Reclaimed) {
			for _, g := range got {
				if _, dup := seen.LoadOrStore(g.OrderID+"/"+g.SKU, true); dup {
					t.Errorf("line %s/%s returned twice", g.OrderID, g.SKU)
				}
				units.Add(g.Qty)
			}
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					got, err := fx.s.ReclaimExpired(fx.ctx(), 3)
					if err != nil {
						t.Errorf("ReclaimExpired: %v", err)
						return
					}
					if len(got) == 0 {
						return
					}
					record(got)
				}
			})
		}
		wg.Wait()
		for { // a reclaimer that lost every race of a batch stops early
			got, err := fx.s.ReclaimExpired(fx.ctx(), 50)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			record(got)
		}
		want := int64(orders-orders/4) * 3
		if got := units.Load(); got != want {
			t.Fatalf("reclaimed %d units, want %d", got, want)
		}
		var held, sold int64
		for _, sku := range skus {
			lv, err := fx.s.Levels(fx.ctx(), sku)
			if err != nil {
				t.Fatal(err)
			}
			held, sold = held+lv.Held, sold+lv.Sold
			if lv.Available+lv.Held+lv.Sold != 200 {
				t.Fatalf("%s: %+v does not add up to 200", sku, lv)
			}
		}
		if held != 0 || sold != orders/4*3 {
			t.Fatalf("held %d, sold %d; want 0, %d", held, sold, orders/4*3)
		}
	})
}

func TestSlotMatchesServer(t *testing.T) {
	for _, b := range backends() {
		if b.name != "cluster" {
			continue
		}
		c, _ := b.client(t)
		for _, sku := range []string{"sku-a", "sku-b", "x", "商品-1"} {
			n, err := c.ClusterKeySlot(t.Context(), "{"+sku+"}").Result()
			if err != nil || int(n) != keyslot.Slot(sku) {
				t.Fatalf("slot(%q) = %d, server says %d (%v)", sku, keyslot.Slot(sku), n, err)
			}
		}
	}
}
