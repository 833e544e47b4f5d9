package redisstock_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func (fx *fixture) saleMax(sku string, units, perUser int64, hold, maxHold time.Duration) {
	fx.t.Helper()
	l := stock.Listing{SKU: sku, Units: units, PerUserLimit: perUser, HoldTTL: hold, MaxHoldTTL: maxHold}
	if err := fx.s.PutOnSale(fx.ctx(), l); err != nil {
		fx.t.Fatal(err)
	}
}

// field reads one field of a line record ("" when missing; see
// Store.Line).
func (fx *fixture) field(sku, order, field string) string {
	fx.t.Helper()
	f, _, err := fx.s.Line(fx.ctx(), sku, order)
	if err != nil {
		fx.t.Fatal(err)
	}
	return f[field]
}

// hasRecord reports whether sku's line of order has a record that reads.
func (fx *fixture) hasRecord(sku, order string) bool {
	fx.t.Helper()
	_, ok, err := fx.s.Line(fx.ctx(), sku, order)
	if err != nil {
		fx.t.Fatal(err)
	}
	return ok
}

// delRecord deletes sku's line record of order, as a partial flush would.
func (fx *fixture) delRecord(sku, order string) {
	fx.t.Helper()
	if err := fx.c.HDel(fx.ctx(), fx.s.LinesKey(sku), order).Err(); err != nil {
		fx.t.Fatal(err)
	}
}

// delEntry deletes the order's directory entry.
func (fx *fixture) delEntry(order string) {
	fx.t.Helper()
	if err := fx.c.HDel(fx.ctx(), fx.s.DirKey(order), order).Err(); err != nil {
		fx.t.Fatal(err)
	}
}

// entryTTL is what a TTL of the order's directory entry would be: -2 when
// there is none, -1 while the order lives (no end), else the time left
// until it stops being read (by the server's clock).
func (fx *fixture) entryTTL(order string) time.Duration {
	fx.t.Helper()
	_, ends, ok, err := fx.s.Entry(fx.ctx(), order)
	switch {
	case err != nil:
		fx.t.Fatal(err)
	case !ok:
		return -2
	case ends == 0:
		return -1
	}
	now, err := fx.c.Time(fx.ctx()).Result() // ends are the server's time
	if err != nil {
		fx.t.Fatal(err)
	}
	return time.UnixMilli(ends).Sub(now)
}

// wantDeadline checks both where a line's deadline lives: the record and
// the SKU's holds zset (which the reclaimer reads).
func (fx *fixture) wantDeadline(sku, order string, want time.Time) {
	fx.t.Helper()
	ms := fmt.Sprint(want.UnixMilli())
	if got := fx.field(sku, order, "dl"); got != ms {
		fx.t.Fatalf("%s of %s: record deadline %s, want %s", sku, order, got, ms)
	}
	if got, where := fx.holdDeadline(sku, order); got != ms {
		fx.t.Fatalf("%s of %s: deadline in the %s %q, want %s", sku, order, where, got, ms)
	}
}

// holdDeadline is the deadline (ms) the reclaimer reads for the order's
// hold of sku: its score in the holds zset, else its entry's in the hold
// queue ("" if in neither), and where it was found.
func (fx *fixture) holdDeadline(sku, order string) (string, string) {
	fx.t.Helper()
	score, err := fx.c.ZScore(fx.ctx(), fx.cfg.Prefix+":{"+sku+"}:holds", order).Result()
	if err == nil {
		return fmt.Sprint(int64(score)), "holds zset"
	}
	if err != redis.Nil {
		fx.t.Fatal(err)
	}
	q, err := fx.c.LRange(fx.ctx(), fx.cfg.Prefix+":{"+sku+"}:hq", 0, -1).Result()
	if err != nil {
		fx.t.Fatal(err)
	}
	for _, e := range q {
		if dl, id, _ := strings.Cut(e, " "); id == order {
			return dl, "hold queue"
		}
	}
	return "", "holds"
}

func (fx *fixture) wantUser(sku, user string, want int64) {
	fx.t.Helper()
	n, err := fx.s.UserUnits(fx.ctx(), sku, user)
	if err != nil || n != want {
		fx.t.Fatalf("UserUnits(%s, %s) = %d, %v; want %d", sku, user, n, err, want)
	}
}

func (fx *fixture) reclaim() []stock.Reclaimed {
	fx.t.Helper()
	got, err := fx.s.ReclaimExpired(fx.ctx(), 100)
	if err != nil {
		fx.t.Fatal(err)
	}
	return got
}

func rt(op, order string, items ...stock.Item) stock.Return {
	return stock.Return{OpID: op, OrderID: order, Items: items}
}

// An order on two slots of a Cluster: a return and an extension touch
// both, the reclaimer honours both, and a return that empties a line
// leaves it out of what the reclaimer reports.
func TestClusterMultiSlotReturnAndExtend(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		t0 := fx.clock.Now()
		fx.saleMax(lo, 10, 5, time.Minute, 10*time.Minute)
		fx.saleMax(hi, 10, 0, time.Minute, 10*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 3), it(hi, 2))), nil, "Deduct")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 2))), nil, "RevertItems")
		fx.want(lo, 8, 2, 0)
		fx.want(hi, 10, 0, 0)
		fx.wantUser(lo, "u1", 2)
		if fx.field(lo, "o1", "ret") != "1" || fx.field(hi, "o1", "ret") != "2" {
			t.Fatalf("ret fields %q, %q; want 1, 2", fx.field(lo, "o1", "ret"), fx.field(hi, "o1", "ret"))
		}
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 2))), nil, "RevertItems repeated")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1))), stock.ErrConflict, "the OpID with other items")
		err := fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(lo, 1), it(hi, 1)))
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != hi || !errors.Is(err, stock.ErrExceedsOrder) {
			t.Fatalf("a return past the emptied line: %v, want ErrExceedsOrder naming %s", err, hi)
		}
		fx.want(lo, 8, 2, 0)
		got, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil || got[0].State != stock.StateHeld || len(got[0].Returned) != 2 {
			t.Fatalf("Orders = %+v, %v; want held with two lines returned", got, err)
		}

		is(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(5*time.Minute)), nil, "ExtendHold")
		fx.wantDeadline(lo, "o1", t0.Add(5*time.Minute))
		fx.wantDeadline(hi, "o1", t0.Add(5*time.Minute))
		is(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(10*time.Minute+time.Millisecond)), stock.ErrHoldTooLong, "ExtendHold past the bound")
		fx.wantDeadline(lo, "o1", t0.Add(5*time.Minute))
		fx.clock.Advance(4 * time.Minute)
		if got := fx.reclaim(); len(got) != 0 {
			t.Fatalf("reclaimed %+v before the extended deadline", got)
		}
		fx.clock.Advance(time.Minute)
		got2 := fx.reclaim()
		if len(got2) != 1 || got2[0] != (stock.Reclaimed{OrderID: "o1", UserID: "u1", SKU: lo, Qty: 2}) {
			t.Fatalf("reclaimed %+v, want only o1 %s 2", got2, lo)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		fx.wantUser(lo, "u1", 0)
		if ttl := fx.entryTTL("o1"); ttl <= 0 {
			t.Fatalf("directory entry TTL %v after the order expired, want Retention", ttl)
		}
	})
}

// A lost reply of a return's per-slot pipeline on a Cluster: the call is an
// unknown outcome and keeps the order's return lock (another return is
// contention), and its retry applies nothing twice; a pipeline never sent
// is completed by the retry; a resent pipeline applies once.
func TestClusterMultiSlotReturnRetries(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 2))), nil, "Deduct")

		fx.hook.arm(2, 1, false) // the lock (taken, then kept) passes, the apply's reply is lost
		unknown(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 1))), "RevertItems with a lost reply")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 9, 1, 0)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(lo, 1))), stock.ErrContention, "another return while the lock is kept")
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it(lo, 1), it(hi, 1))), nil, "the retry")
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 9, 1, 0)

		fx.hook.arm(2, 1, true) // the lock passes, the apply is never sent
		unknown(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(lo, 1))), "RevertItems not sent")
		fx.want(lo, 9, 1, 0)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it(lo, 1))), nil, "the retry")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 9, 1, 0)

		h := &resendHook{}
		fx.c.AddHook(h)
		h.arm("stock_return.lua", 1)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r3", "o1", it(hi, 1))), nil, "RevertItems resent")
		fx.want(hi, 10, 0, 0)
		got, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil || got[0].State != stock.StateReverted {
			t.Fatalf("Orders = %+v, %v; want reverted: every unit was given back", got, err)
		}
		if ttl := fx.entryTTL("o1"); ttl <= 0 {
			t.Fatalf("directory entry TTL %v after the order ended, want Retention", ttl)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrOrderClosed, "Confirm of the emptied order")
	})
}

// Concurrent returns of one order on two slots: the lock lets one check and
// apply at a time, so exactly what the order holds is given back.
func TestClusterConcurrentMultiSlotReturns(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 4), it(hi, 4))), nil, "Deduct")
		const calls = 12 // each asks one unit of each line: 4 can apply
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied, refused := 0, 0
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				for range 1000 {
					err = fx.s.RevertItems(fx.ctx(), rt(fmt.Sprint("r", i), "o1", it(lo, 1), it(hi, 1)))
					if !errors.Is(err, stock.ErrContention) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					applied++
				case errors.Is(err, stock.ErrExceedsOrder), errors.Is(err, stock.ErrOrderClosed):
					refused++
				default:
					t.Errorf("RevertItems: %v", err)
				}
			}()
		}
		wg.Wait()
		if applied != 4 || refused != calls-4 {
			t.Fatalf("%d returns applied, %d refused; want 4, %d", applied, refused, calls-4)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// A lost reply of a return and of an extension, on every backend: the
// retry answers nil and changes nothing more; a return that ends the order
// still gives its directory entry Retention on the retry.
func TestLostReplyRetryOfReturnAndExtend(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		t0 := fx.clock.Now()
		fx.saleMax("a", 10, 5, time.Minute, 10*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 3))), nil, "Deduct")

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it("a", 1))), "RevertItems with a lost reply")
		fx.want("a", 8, 2, 0)
		is(t, fx.s.RevertItems(fx.ctx(), rt("r1", "o1", it("a", 1))), nil, "the retry")
		fx.want("a", 8, 2, 0)
		fx.wantUser("a", "u1", 2)

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(3*time.Minute)), "ExtendHold with a lost reply")
		fx.wantDeadline("a", "o1", t0.Add(3*time.Minute))
		is(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(3*time.Minute)), nil, "the retry")
		fx.wantDeadline("a", "o1", t0.Add(3*time.Minute))

		fx.hook.arm(0, 1, false)
		unknown(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it("a", 2))), "the last units, reply lost")
		fx.want("a", 10, 0, 0)
		if ttl := fx.entryTTL("o1"); ttl != -1 {
			t.Fatalf("directory entry TTL %v before the retry, want none (the test's premise)", ttl)
		}
		is(t, fx.s.RevertItems(fx.ctx(), rt("r2", "o1", it("a", 2))), nil, "the retry")
		fx.want("a", 10, 0, 0)
		fx.wantUser("a", "u1", 0)
		if ttl := fx.entryTTL("o1"); ttl <= 0 {
			t.Fatalf("directory entry TTL %v after the retry, want Retention", ttl)
		}
		if n := fx.c.Exists(fx.ctx(), fx.cfg.Prefix+":{a}:holds").Val(); n != 0 {
			t.Fatalf("holds zset still has the emptied order")
		}
	})
}

// An own hold time past a later slot group's maximum: every group is
// undone, nothing is left (no record, no directory entry), and the line
// named is the one with the shortest maximum. The bound is one on every
// line: a later group with a shorter maximum moves the earlier ones'.
func TestClusterHoldTooLongInALaterSlotWritesNothing(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		t0 := fx.clock.Now()
		fx.saleMax(lo, 10, 0, time.Minute, 10*time.Minute)
		fx.saleMax(hi, 10, 0, time.Minute, 3*time.Minute)
		err := fx.s.Deduct(fx.ctx(), stock.Order{ID: "o1", Items: []stock.Item{it(lo, 1), it(hi, 1)}, HoldTTL: 5 * time.Minute})
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != hi || !errors.Is(err, stock.ErrHoldTooLong) {
			t.Fatalf("Deduct past %s's maximum: %v", hi, err)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		if fx.hasRecord(lo, "o1") || fx.hasRecord(hi, "o1") || fx.entryTTL("o1") != -2 {
			t.Fatalf("the refused order left a record or its directory entry")
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it(lo, 2))), nil, "the ID is free")

		is(t, fx.s.Deduct(fx.ctx(), stock.Order{ID: "o2", Items: []stock.Item{it(lo, 1), it(hi, 1)}, HoldTTL: 2 * time.Minute}), nil, "Deduct within both")
		want := fmt.Sprint(t0.Add(3 * time.Minute).UnixMilli())
		if a, b := fx.field(lo, "o2", "mx"), fx.field(hi, "o2", "mx"); a != want || b != want {
			t.Fatalf("bounds %s, %s; want %s on both lines", a, b, want)
		}
		fx.wantDeadline(lo, "o2", t0.Add(2*time.Minute))
		fx.wantDeadline(hi, "o2", t0.Add(2*time.Minute))
		is(t, fx.s.ExtendHold(fx.ctx(), "o2", t0.Add(4*time.Minute)), stock.ErrHoldTooLong, "ExtendHold past the moved bound")

		// Two SKUs with the same maximum: the one first by SKU is named.
		fx.saleMax(lo, 10, 0, time.Minute, 2*time.Minute)
		fx.saleMax(hi, 10, 0, time.Minute, 2*time.Minute)
		err = fx.s.Deduct(fx.ctx(), stock.Order{ID: "o3", Items: []stock.Item{it(lo, 1), it(hi, 1)}, HoldTTL: 5 * time.Minute})
		if first := min(lo, hi); !errors.As(err, &se) || se.SKU != first {
			t.Fatalf("Deduct past both maxima: %v, want a *stock.SKUError naming %s", err, first)
		}
	})
}

// A state written before max_ms existed reads as the version that wrote it
// meant it: the maximum is the hold time. An order taken before keeps the
// bound it was given.
func TestStateWithoutTheMaximum(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		t0 := fx.clock.Now()
		fx.saleMax("a", 10, 0, time.Minute, 5*time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it("a", 1))), nil, "Deduct")
		fx.c.HDel(fx.ctx(), fx.cfg.Prefix+":{a}:state", "max_ms")
		lv, err := fx.s.Levels(fx.ctx(), "a")
		if err != nil || lv.MaxHoldTTL != time.Minute {
			t.Fatalf("Levels = %+v, %v; want MaxHoldTTL 1m0s", lv, err)
		}
		is(t, fx.s.Deduct(fx.ctx(), stock.Order{ID: "o2", Items: []stock.Item{it("a", 1)}, HoldTTL: 2 * time.Minute}),
			stock.ErrHoldTooLong, "Deduct past the hold time of an old state")
		is(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(5*time.Minute+time.Millisecond)), stock.ErrHoldTooLong, "ExtendHold past the order's bound")
		is(t, fx.s.ExtendHold(fx.ctx(), "o1", t0.Add(5*time.Minute)), nil, "ExtendHold to the order's bound")
		fx.want("a", 9, 1, 0)
	})
}

// Relist and Rebuild set the maximum hold time as PutOnSale does.
func TestRelistAndRebuildSetTheMaximum(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.saleMax("a", 10, 0, time.Minute, 5*time.Minute)
		st, err := fx.s.Inspect(fx.ctx(), []string{"a"})
		if err != nil || st[0].MaxHoldTTL != 5*time.Minute {
			t.Fatalf("Inspect = %+v, %v", st, err)
		}
		out, err := fx.s.Relist(fx.ctx(), []redisstock.Relist{{SKU: "a", Fence: st[0].Fence, HoldTTL: time.Minute, MaxHoldTTL: 7 * time.Minute}})
		if err != nil || out[0] != redisstock.Applied {
			t.Fatalf("Relist = %v, %v", out, err)
		}
		if lv, _ := fx.s.Levels(fx.ctx(), "a"); lv.MaxHoldTTL != 7*time.Minute {
			t.Fatalf("MaxHoldTTL after Relist %v, want 7m0s", lv.MaxHoldTTL)
		}
		out, err = fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "b", Units: 3, MaxHoldTTL: 20 * time.Minute}}})
		if err != nil || out[0] != redisstock.Applied {
			t.Fatalf("Rebuild = %v, %v", out, err)
		}
		if lv, _ := fx.s.Levels(fx.ctx(), "b"); lv.MaxHoldTTL != 20*time.Minute || lv.HoldTTL != stock.DefaultHoldTTL {
			t.Fatalf("Levels after Rebuild %+v, want hold 15m, max 20m", lv)
		}
	})
}

// Lines partial reverts emptied end with their orders but are not
// reported; they must not make a pass look drained: a pass still reports
// up to its limit while lines with something left are due.
func TestReclaimSkipsEmptiedLinesWithinItsLimit(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		const orders = 5
		for i := range orders {
			id := fmt.Sprint("o", i)
			is(t, fx.s.Deduct(fx.ctx(), ord(id, "u1", it("a", 1), it("b", 1))), nil, "Deduct")
			is(t, fx.s.RevertItems(fx.ctx(), rt("r", id, it("a", 1))), nil, "RevertItems")
		}
		fx.want("a", 10, 0, 0)
		fx.clock.Advance(time.Minute)
		var all []stock.Reclaimed
		for pass := 0; ; pass++ {
			got, err := fx.s.ReclaimExpired(fx.ctx(), 2)
			if err != nil {
				t.Fatal(err)
			}
			if pass < orders/2 && len(got) != 2 {
				t.Fatalf("pass %d reported %+v, want 2 lines: due lines with units are left", pass, got)
			}
			if len(got) == 0 {
				break
			}
			all = append(all, got...)
		}
		if len(all) != orders {
			t.Fatalf("reported %+v, want the %d b lines", all, orders)
		}
		for _, r := range all {
			if r.SKU != "b" || r.Qty != 1 {
				t.Fatalf("reported %+v, want only b lines of 1", r)
			}
		}
		fx.want("a", 10, 0, 0)
		fx.want("b", 10, 0, 0)
		for i := range orders {
			if ttl := fx.entryTTL(fmt.Sprint("o", i)); ttl <= 0 {
				t.Fatalf("o%d's directory entry TTL %v, want Retention", i, ttl)
			}
		}
	})
}
