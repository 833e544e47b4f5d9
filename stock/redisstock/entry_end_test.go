package redisstock_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A Confirm whose entry's end was lost leaves the entry to the reclaimer,
// which ends it a while later, read no longer than the order's lines: so
// while the ended entry is read, the order's lines are read too, and
// within Retention of the Confirm the order reads as confirmed and a
// repeat Deduct answers nil, taking nothing.
func TestReclaimerEndedEntryKeepsItsLines(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.DirKey("o1")) // the entry's end is lost
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
		drop.arm("")
		elapse(fx, 5*time.Minute)
		fx.reclaim() // ends the entry
		wantLinesOutliveEntry(t, fx, "o1", lo, hi)
		elapse(fx, 50*time.Minute) // within Retention of the Confirm
		_, e, ok, _ := fx.s.Entry(fx.ctx(), "o1")
		_, lineOK, _ := fx.s.Line(fx.ctx(), lo, "o1")
		t.Logf("entry read %v (ends %d), line of %s read %v", ok, e, lo, lineOK)
		infos, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		errD := fx.s.Deduct(fx.ctx(), o)
		lvD, _ := fx.s.Levels(fx.ctx(), lo)
		t.Logf("after the repeat Deduct: %s %+v", lo, lvD)
		if infos[0].State != stock.StateConfirmed || errD != nil || lvD.Held+lvD.Sold != 1 {
			t.Fatalf("an ended entry read without its lines: Orders %v, repeat Deduct %v, then %s %+v (one order of 1 unit)", infos[0].State, errD, lo, lvD)
		}
	})
}

// The same on every backend, in seconds of the servers' time: a hold of
// 1 s, Retention 5 s; the reclaimer ends the entry 2 s after the Confirm
// (its check is due by the Store's clock, moved on 2 minutes); the reads
// come 1.5 s later, within Retention of the Confirm.
func TestReclaimerEndedEntryKeepsItsLinesShort(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: 5 * time.Second})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Second)
		fx.sale(hi, 10, 0, time.Second)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.DirKey("o1")) // the entry's end is lost
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
		drop.arm("")
		elapse(fx, 2*time.Second)
		fx.clock.Advance(2 * time.Minute)
		fx.reclaim() // ends the entry
		wantLinesOutliveEntry(t, fx, "o1", lo, hi)
		elapse(fx, 1500*time.Millisecond)
		_, e, ok, _ := fx.s.Entry(fx.ctx(), "o1")
		_, lineOK, _ := fx.s.Line(fx.ctx(), lo, "o1")
		t.Logf("entry read %v (ends %d), line of %s read %v", ok, e, lo, lineOK)
		infos, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		errD := fx.s.Deduct(fx.ctx(), o)
		lvD, _ := fx.s.Levels(fx.ctx(), lo)
		if infos[0].State != stock.StateConfirmed || errD != nil || lvD.Held+lvD.Sold != 1 {
			t.Fatalf("an ended entry read without its lines: Orders %v, repeat Deduct %v, then %s %+v (one order of 1 unit)", infos[0].State, errD, lo, lvD)
		}
	})
}

// A multi-slot Confirm whose entry's end was lost, retried later: the
// retry ends the entry (Retention from now) and every line with it, so
// while the ended entry is read the order reads as confirmed, a repeat
// Deduct answers nil and a refund returns every line.
func TestRetriedConfirmKeepsTheLinesAsLongAsTheEntry(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 15*time.Minute)
		fx.sale(hi, 10, 0, 15*time.Minute)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.DirKey("o1")) // the entry's end is lost
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
		drop.arm("")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		elapse(fx, 50*time.Minute)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retried Confirm")
		if _, e, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || e == 0 {
			t.Fatalf("entry after the retry: ended at %d, read %v, %v", e, ok, err)
		}
		elapse(fx, 20*time.Minute) // within Retention of the retry that ended the entry
		_, e, ok, _ := fx.s.Entry(fx.ctx(), "o1")
		_, lineOK, _ := fx.s.Line(fx.ctx(), lo, "o1")
		t.Logf("entry read %v (ends %d), line of %s read %v", ok, e, lo, lineOK)
		infos, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		errD := fx.s.Deduct(fx.ctx(), o)
		errR := fx.s.Revert(fx.ctx(), "o1")
		t.Logf("Orders: %v; repeat Deduct: %v; refund: %v", infos[0].State, errD, errR)
		if infos[0].State != stock.StateConfirmed || errD != nil || errR != nil {
			t.Fatalf("an ended entry read without its lines: Orders %v, repeat Deduct %v, refund %v", infos[0].State, errD, errR)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// The same on every Cluster backend, in seconds: Retention 2 s, the retry
// 1.5 s after the first Confirm, the reads 1 s after the retry.
func TestRetriedConfirmKeepsTheLinesAsLongAsTheEntryShort(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: 2 * time.Second})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, 15*time.Minute)
		fx.sale(hi, 10, 0, 15*time.Minute)
		o := ord("o1", "u1", it(lo, 1), it(hi, 1))
		is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
		drop := &dropHook{}
		fx.c.AddHook(drop)
		drop.arm(fx.s.DirKey("o1")) // the entry's end is lost
		unknown(t, fx.s.Confirm(fx.ctx(), "o1"), "Confirm whose entry's end was lost")
		drop.arm("")
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		elapse(fx, 1500*time.Millisecond)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "the retried Confirm")
		if _, e, ok, err := fx.s.Entry(fx.ctx(), "o1"); err != nil || !ok || e == 0 {
			t.Fatalf("entry after the retry: ended at %d, read %v, %v", e, ok, err)
		}
		elapse(fx, time.Second) // within Retention of the retry that ended the entry
		_, e, ok, _ := fx.s.Entry(fx.ctx(), "o1")
		_, lineOK, _ := fx.s.Line(fx.ctx(), lo, "o1")
		t.Logf("entry read %v (ends %d), line of %s read %v", ok, e, lo, lineOK)
		infos, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		errD := fx.s.Deduct(fx.ctx(), o)
		errR := fx.s.Revert(fx.ctx(), "o1")
		t.Logf("Orders: %v; repeat Deduct: %v; refund: %v", infos[0].State, errD, errR)
		if infos[0].State != stock.StateConfirmed || errD != nil || errR != nil {
			t.Fatalf("an ended entry read without its lines: Orders %v, repeat Deduct %v, refund %v", infos[0].State, errD, errR)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
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
