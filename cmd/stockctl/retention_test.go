package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A shop whose gate keeps what it has done for a shorter time than
// redisstock's default (redisstock.Config.Retention, which
// stockguard.Config.Gate passes through; here 2s) restocks a SKU through its
// flow: both tiers take the 2,000 units and agree. Later, 'stockctl
// reconcile --dry-run', given the shop's Retention (--retention, or
// STOCKCTL_RETENTION), reads the record's restocks back half of it, as
// reconcile.Config.RestockWindow derives ("New refuses a window not below
// the gate's Retention (the gate must remember every operation of the
// window)"), and finds the tiers in agreement: exit 0, "the tiers are in
// agreement". Without the setting stockctl read 12h back (half of its own
// gate's default Retention), asked the gate for an operation ID the gate
// had forgotten, and reported the 2,000 units as RESTOCKING with a DELTA of
// -2000: a drift that is not there, exit 1, which '--apply' then left "for
// a person".
func TestReconcileReportsNoRestockTheGateAppliedForAShopWithAShortRetention(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		shopGate, err := redisstock.New(s.rc, redisstock.Config{Prefix: s.prefix, Clock: s.clock, Retention: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		flow := tiered.New(shopGate, s.record, tiered.Config{Clock: s.clock})
		if err := flow.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
			t.Fatal(err)
		}
		if err := flow.Restock(s.ctx, stock.Restock{OpID: "delivery-7", SKU: "phone", Units: 2000}); err != nil {
			t.Fatal(err)
		}
		s.wantAvailable("phone", 2010, 2010)
		// The gate's memory of the operation ends on the server's clock.
		if s.mini != nil {
			s.mini.FastForward(3 * time.Second)
		} else {
			time.Sleep(3 * time.Second)
		}
		s.clock.Advance(time.Minute)

		s.run("--retention", "2s", "reconcile", "--dry-run").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
		s.env = map[string]string{"STOCKCTL_RETENTION": "2s"}
		s.run("reconcile", "--dry-run").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
		s.wantAvailable("phone", 2010, 2010)
	})
}

// --retention is the shop's redisstock.Config.Retention: one redisstock.New
// refuses (below redisstock.MinRetention) or a negative one is a bad flag,
// exit 2, before anything is connected.
func TestRetentionRefusesWhatRedisstockRefuses(t *testing.T) {
	s := newShop(t, backends()[0]) // miniredis + SQLite
	for _, v := range []string{"-1h", "500ms"} {
		s.run("--retention", v, "put-on-sale", "tv", "3").exits(t, exitUsage, "--retention "+v)
		if _, err := s.record.Levels(s.ctx, "tv"); err == nil {
			t.Fatalf("--retention %s: the refused put-on-sale wrote tv to the record", v)
		}
	}
}
