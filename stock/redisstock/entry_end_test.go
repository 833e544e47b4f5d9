package redisstock_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// entryEnd is a run of the tests below: the Store's Retention, the SKUs'
// hold time, the time between the Confirm and the call that ends the
// entry (the Store's clock moved on by clock more), and from then to the
// reads.
type entryEnd struct {
	retention, hold, ends, clock, reads time.Duration
}

// confirmLosingEntryEnd sells o1 (a unit of each of two SKUs, on two slots on a
// Cluster) and confirms it with its directory entry's end lost: the lines
// are confirmed, the entry is left to a retry or to the reclaimer.
func confirmLosingEntryEnd(t *testing.T, fx *fixture, r entryEnd) (o stock.Order, lo, hi string) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: r.retention})
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, r.hold)
	fx.sale(hi, 10, 0, r.hold)
	o = ord("o1", "u1", it(lo, 1), it(hi, 1))
	is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
	drop := &dropHook{}
	fx.c.AddHook(drop)
	drop.arm(fx.s.DirKey("o1")) // the entry's end is lost
	unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
	drop.arm("")
	fx.want(lo, 9, 0, 1)
	fx.want(hi, 9, 0, 1)
	elapse(fx, r.ends)
	fx.clock.Advance(r.clock)
	return o, lo, hi
}

// wantConfirmed checks that o1, a unit of lo and of hi, reads as
// confirmed and that a repeat Deduct answers nil, taking nothing.
func wantConfirmed(t *testing.T, fx *fixture, o stock.Order, lo string) {
	t.Helper()
	infos, err := fx.s.Orders(fx.ctx(), []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	errD := fx.s.Deduct(fx.ctx(), o)
	lvD, _ := fx.s.Levels(fx.ctx(), lo)
	if infos[0].State != stock.StateConfirmed || errD != nil || lvD.Held+lvD.Sold != 1 {
		t.Fatalf("an ended entry read without its lines: Orders %v, repeat Deduct %v, then %s %+v (one order of 1 unit)", infos[0].State, errD, lo, lvD)
	}
}

// A Confirm whose entry's end was lost leaves the entry to the reclaimer,
// which ends it a while later, read no longer than the order's lines: so
// while the ended entry is read, the order's lines are read too, and
// within Retention of the Confirm the order reads as confirmed and a
// repeat Deduct answers nil, taking nothing. On miniredis in minutes; on
// every backend in seconds of the servers' time (a hold of 1 s, the
// reclaimer's check due by the Store's clock, moved on 2 minutes).
func TestReclaimerEndedEntryKeepsItsLines(t *testing.T) {
	run := func(r entryEnd) func(t *testing.T, fx *fixture) {
		return func(t *testing.T, fx *fixture) {
			o, lo, hi := confirmLosingEntryEnd(t, fx, r)
			fx.reclaim() // ends the entry
			wantLinesOutliveEntry(t, fx, "o1", lo, hi)
			elapse(fx, r.reads) // within Retention of the Confirm
			wantConfirmed(t, fx, o, lo)
		}
	}
	t.Run("minutes", func(t *testing.T) {
		eachMini(t, run(entryEnd{retention: time.Hour, hold: time.Minute, ends: 5 * time.Minute, reads: 50 * time.Minute}))
	})
	t.Run("seconds", func(t *testing.T) {
		each(t, run(entryEnd{retention: 5 * time.Second, hold: time.Second, ends: 2 * time.Second, clock: 2 * time.Minute, reads: 1500 * time.Millisecond}))
	})
}

// A multi-slot Confirm whose entry's end was lost, retried later: the
// retry confirms every line again and ends the entry, so while the ended
// entry is read the order reads as confirmed, a repeat Deduct answers nil
// and a refund returns every line. On miniredis in minutes; on every
// Cluster backend in seconds.
func TestRetriedConfirmKeepsTheLinesAsLongAsTheEntry(t *testing.T) {
	run := func(r entryEnd) func(t *testing.T, fx *fixture) {
		return func(t *testing.T, fx *fixture) {
			o, lo, hi := confirmLosingEntryEnd(t, fx, r)
			is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retried Confirm")
			if _, e, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || e == 0 {
				t.Fatalf("entry after the retry: ended at %d, read %v, %v", e, ok, err)
			}
			elapse(fx, r.reads) // within Retention of the retry that ended the entry
			wantConfirmed(t, fx, o, lo)
			is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "the refund")
			fx.want(lo, 10, 0, 0)
			fx.want(hi, 10, 0, 0)
		}
	}
	t.Run("minutes", func(t *testing.T) {
		eachMiniCluster(t, run(entryEnd{retention: time.Hour, hold: 15 * time.Minute, ends: 50 * time.Minute, reads: 20 * time.Minute}))
	})
	t.Run("seconds", func(t *testing.T) {
		eachCluster(t, run(entryEnd{retention: 2 * time.Second, hold: 15 * time.Minute, ends: 1500 * time.Millisecond, reads: time.Second}))
	})
}

// wantLinesOutliveEntry checks that the order's directory entry has ended
// and that its line of each SKU is read at least as long as the entry is:
// no line reads as absent while the ended entry is still read.
func wantLinesOutliveEntry(t *testing.T, fx *fixture, order string, skus ...string) {
	t.Helper()
	_, ends, ok, err := fx.s.Entry(fx.ctx(), order)
	if err != nil || !ok || ends == 0 {
		t.Fatalf("entry: ends at %d, read %v, %v; want ended and read", ends, ok, err)
	}
	for _, sku := range skus {
		l, ok, err := fx.s.Line(fx.ctx(), sku, order)
		if err != nil || !ok {
			t.Fatalf("line of %s: read %v, %v; want read while the entry is", sku, ok, err)
		}
		if e, _ := strconv.ParseInt(l["e"], 10, 64); e < ends {
			t.Fatalf("line of %s ends at %s, before the entry (%d)", sku, l["e"], ends)
		}
	}
}
