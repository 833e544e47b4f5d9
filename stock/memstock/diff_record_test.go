package memstock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// diffRecord runs scenario on memstock and on sqlstock over SQLite (the
// record backends) and fails when they observe different outcomes.
func diffRecord(t *testing.T, scenario func(ctx context.Context, m tiered.RecordStore, c *stocktest.Clock, log func(string, ...any))) {
	t.Helper()
	run := func(m func(*stocktest.Clock) tiered.RecordStore) []string {
		c := stocktest.NewClock(stocktest.Epoch)
		var lines []string
		scenario(context.Background(), m(c), c, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
		return lines
	}
	mem := run(func(c *stocktest.Clock) tiered.RecordStore { return newMem(t, c).(tiered.RecordStore) })
	sq := run(func(c *stocktest.Clock) tiered.RecordStore { return newSQLite(t, c) })
	compareSteps(t, "memstock:", mem, "sqlstock:", sq)
}

func TestDiffRecordSide(t *testing.T) {
	diffRecord(t, func(ctx context.Context, m tiered.RecordStore, c *stocktest.Clock, log func(string, ...any)) {
		do := func(what string, err error) { log("%s: %s", what, class(err)) }
		do("put a", m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, PerUserLimit: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}))
		do("put b", m.PutOnSale(ctx, stock.Listing{SKU: "b", Units: 20, HoldTTL: 2 * time.Minute}))
		for i := range 6 {
			items := []stock.Item{{SKU: "a", Qty: 1}}
			if i%2 == 0 {
				items = append(items, stock.Item{SKU: "b", Qty: 2})
			}
			do(fmt.Sprint("deduct o", i), m.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), UserID: "u", Items: items}))
			c.Advance(time.Second)
		}
		do("ri o0", m.RevertItems(ctx, stock.Return{OpID: "p", OrderID: "o0", Items: []stock.Item{{SKU: "b", Qty: 2}}}))
		do("confirm o1", m.Confirm(ctx, "o1"))
		do("revert o2", m.Revert(ctx, "o2"))
		do("extend o3", m.ExtendHold(ctx, "o3", stocktest.Epoch.Add(10*time.Minute)))
		hb := func(at time.Duration, limit int) {
			infos, err := m.HeldBefore(ctx, stocktest.Epoch.Add(at), limit)
			log("heldbefore(%v,%d): %s", at, limit, class(err))
			for _, o := range infos {
				log("  %s %v %v ret=%v dl=%v", o.ID, o.State, o.Items, o.Returned, o.Deadline.Sub(stocktest.Epoch))
			}
		}
		hb(time.Minute+2*time.Second, 10)
		hb(time.Hour, 2)
		hb(time.Hour, 10)
		for _, id := range []string{"o0", "o1", "o2", "o4", "o4", "nope"} {
			st, err := m.RevertHeld(ctx, id)
			log("revertheld %s: %v %s", id, st, class(err))
		}
		c.Advance(time.Hour)
		do("confirm o3", m.Confirm(ctx, "o3"))
		do("ri o1 after deadline", m.RevertItems(ctx, stock.Return{OpID: "q", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}))
		n, err := m.UserUnits(ctx, "a", "u")
		log("userunits a/u %d %s", n, class(err))
		n, err = m.UserUnits(ctx, "b", "nobody")
		log("userunits b/nobody %d %s", n, class(err))
		n, err = m.UserUnits(ctx, "zz", "u")
		log("userunits zz/u %d %s", n, class(err))
		for _, sku := range []string{"a", "b"} {
			lv, err := m.Levels(ctx, sku)
			log("levels %s %+v %s", sku, lv, class(err))
		}
		got, err := m.ReclaimExpired(ctx, 100)
		log("reclaim %d lines %s", len(got), class(err))
		infos, err := m.Orders(ctx, []string{"o0", "o1", "o2", "o3", "o4", "o5"})
		log("orders %s", class(err))
		for _, o := range infos {
			log("  %s %v ret=%v", o.ID, o.State, o.Returned)
		}
	})
}
