package stocktest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// zzClass names an error by the sentinel it matches.
func zzClass(err error) string {
	if err == nil {
		return "nil"
	}
	for _, s := range []error{stock.ErrInvalid, stock.ErrSoldOut, stock.ErrLimitReached, stock.ErrUnknownSKU, stock.ErrUnknownOrder,
		stock.ErrConflict, stock.ErrHoldExpired, stock.ErrOrderClosed, stock.ErrOrderConfirmed, stock.ErrHoldTooLong,
		stock.ErrExceedsOrder, stock.ErrContention, stock.ErrUnknownOutcome, stock.ErrUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

type zzTrace struct {
	t     *testing.T
	m     stock.Manager
	clock *stocktest.Clock
	lines []string
}

func (z *zzTrace) log(format string, a ...any) { z.lines = append(z.lines, fmt.Sprintf(format, a...)) }

func (z *zzTrace) call(what string, err error) { z.log("%s -> %s", what, zzClass(err)) }

func (z *zzTrace) levels(sku string) {
	lv, err := z.m.Levels(z.t.Context(), sku)
	z.log("Levels(%s) = %+v %s", sku, lv, zzClass(err))
}

func (z *zzTrace) orders(ids ...string) {
	rd, ok := z.m.(stock.OrderReader)
	if !ok {
		return
	}
	in, err := rd.Orders(z.t.Context(), ids)
	for _, o := range in {
		if o.State != stock.StateHeld {
			o.Deadline = time.Time{} // only a held order's deadline is promised
		}
		z.log("Orders(%s) = %v items %v returned %v deadline %s", o.ID, o.State, o.Items, o.Returned, o.Deadline.UTC().Format(time.RFC3339Nano))
	}
	if err != nil {
		z.log("Orders err %s", zzClass(err))
	}
}

// zzAgree runs script on memstock and on every backend and fails where a
// backend's trace differs from memstock's.
func zzAgree(t *testing.T, start time.Time, script func(z *zzTrace)) {
	ref := &zzTrace{t: t, clock: stocktest.NewClock(start)}
	ref.m = memstock.New(ref.clock)
	script(ref)
	for _, b := range zzBackends()[1:] {
		t.Run(b.name, func(t *testing.T) {
			clock := stocktest.NewClock(start)
			z := &zzTrace{t: t, clock: clock, m: b.make(t, clock)}
			script(z)
			diffs := 0
			for i := range max(len(z.lines), len(ref.lines)) {
				var got, want string
				if i < len(z.lines) {
					got = z.lines[i]
				}
				if i < len(ref.lines) {
					want = ref.lines[i]
				}
				if got != want {
					diffs++
					t.Errorf("step %d differs from memstock:\n got  %s\n want %s", i, got, want)
				}
			}
			if diffs > 0 {
				t.Logf("whole trace:\n%s", strings.Join(z.lines, "\n"))
			}
		})
	}
}

// Hold times and deadlines "count in whole milliseconds (truncated)" on
// every backend; backends agree with memstock on sub-millisecond inputs.
func TestZZSubMillisecondHoldTimesAgree(t *testing.T) {
	zzAgree(t, stocktest.Epoch.Add(700*time.Microsecond), func(z *zzTrace) {
		ctx := z.t.Context()
		z.call("PutOnSale a", z.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute + 300*time.Microsecond, MaxHoldTTL: 2*time.Minute + 900*time.Microsecond}))
		z.levels("a")
		z.call("Deduct o1", z.m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 1))))
		z.call("Deduct o2 2m+500us", z.m.Deduct(ctx, stock.Order{ID: "o2", Items: []stock.Item{zzItem("a", 1)}, HoldTTL: 2*time.Minute + 500*time.Microsecond}))
		z.call("Deduct o3 1.5ms", z.m.Deduct(ctx, stock.Order{ID: "o3", Items: []stock.Item{zzItem("a", 1)}, HoldTTL: 1500 * time.Microsecond}))
		z.orders("o1", "o2", "o3")
		if x, ok := z.m.(stock.HoldExtender); ok {
			z.call("ExtendHold o1 to +2m+600us", x.ExtendHold(ctx, "o1", stocktest.Epoch.Add(2*time.Minute+1300*time.Microsecond)))
			z.orders("o1")
		}
		z.clock.Advance(time.Millisecond)
		z.call("Confirm o3 after 1ms", z.m.Confirm(ctx, "o3"))
		z.clock.Advance(time.Minute - time.Millisecond)
		z.call("Confirm o2 at +1m", z.m.Confirm(ctx, "o2"))
		z.levels("a")
	})
}

// PutOnSale again with other settings while holds exist keeps the holds,
// their deadlines and the users' quotas.
func TestZZRelistWhileHeldAgrees(t *testing.T) {
	zzAgree(t, stocktest.Epoch, func(z *zzTrace) {
		ctx := z.t.Context()
		z.call("PutOnSale a", z.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5, HoldTTL: time.Minute, MaxHoldTTL: 10 * time.Minute}))
		z.call("Deduct o1", z.m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 4))))
		z.call("Deduct o2", z.m.Deduct(ctx, zzOrder("o2", "u1", zzItem("a", 1))))
		z.call("Confirm o2", z.m.Confirm(ctx, "o2"))
		z.call("PutOnSale a again", z.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, PerUserLimit: 2, HoldTTL: 5 * time.Minute}))
		z.levels("a")
		z.orders("o1", "o2")
		z.call("Deduct o3 (u1 past new limit)", z.m.Deduct(ctx, zzOrder("o3", "u1", zzItem("a", 1))))
		z.call("Deduct o1 repeat", z.m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 4))))
		if rd, ok := z.m.(stock.OrderReader); ok {
			n, err := rd.UserUnits(ctx, "a", "u1")
			z.log("UserUnits = %d %s", n, zzClass(err))
		}
		if pr, ok := z.m.(stock.PartialReverter); ok {
			z.call("RevertItems o1 r1 3", pr.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{zzItem("a", 3)}}))
			z.call("RevertItems o2 r1 1", pr.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o2", Items: []stock.Item{zzItem("a", 1)}}))
			z.call("RevertItems o2 r2 1", pr.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: "o2", Items: []stock.Item{zzItem("a", 1)}}))
			z.orders("o1", "o2")
		}
		if x, ok := z.m.(stock.HoldExtender); ok {
			z.call("ExtendHold o1 +10m", x.ExtendHold(ctx, "o1", stocktest.Epoch.Add(10*time.Minute)))
			z.call("ExtendHold o1 +10m1ms", x.ExtendHold(ctx, "o1", stocktest.Epoch.Add(10*time.Minute+time.Millisecond)))
		}
		z.levels("a")
		z.clock.Advance(2 * time.Minute)
		z.call("Confirm o1", z.m.Confirm(ctx, "o1"))
		z.call("Revert o1", z.m.Revert(ctx, "o1"))
		z.call("Revert o1", z.m.Revert(ctx, "o1"))
		z.levels("a")
		z.orders("o1", "o2")
		z.call("Deduct o4", z.m.Deduct(ctx, zzOrder("o4", "u1", zzItem("a", 2))))
		z.call("Deduct o5", z.m.Deduct(ctx, zzOrder("o5", "u1", zzItem("a", 1))))
		z.clock.Advance(6 * time.Minute)
		if r, ok := z.m.(stock.Reclaimer); ok {
			got, err := r.ReclaimExpired(ctx, 100)
			z.log("Reclaim = %+v %s", got, zzClass(err))
		}
		z.levels("a")
	})
}

// Orders reports "in the order given", duplicates included.
func TestZZOrdersWithDuplicatesAgree(t *testing.T) {
	zzAgree(t, stocktest.Epoch, func(z *zzTrace) {
		ctx := z.t.Context()
		z.call("PutOnSale a", z.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}))
		z.call("Deduct o1", z.m.Deduct(ctx, zzOrder("o1", "u1", zzItem("a", 4))))
		z.orders("o1", "x", "o1", "x")
		z.orders()
		if rd, ok := z.m.(stock.OrderReader); ok {
			n, err := rd.UserUnits(ctx, "nope", "u1")
			z.log("UserUnits unknown sku = %d %s", n, zzClass(err))
			n, err = rd.UserUnits(ctx, "a", "nobody")
			z.log("UserUnits nobody = %d %s", n, zzClass(err))
		}
		if x, ok := z.m.(stock.HoldExtender); ok {
			z.call("ExtendHold o1 zero time", x.ExtendHold(ctx, "o1", time.Time{}))
			z.call("ExtendHold o1 far past", x.ExtendHold(ctx, "o1", time.Unix(0, 0)))
		}
		z.orders("o1")
	})
}
