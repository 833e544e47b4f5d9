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
// reconcile --dry-run' reads the record's restocks 12h back (half of its own
// gate's default Retention), asks the gate for an operation ID the gate
// has forgotten, and reports the 2,000 units as RESTOCKING ("restocks the
// record applied and the gate not yet") with a DELTA of -2000: a drift
// that is not there, exit 1; '--apply' then leaves it "for a person"
// (exit 1). reconcile.Config.RestockWindow: "New refuses a window not
// below the gate's Retention (the gate must remember every operation of
// the window)"; stockctl has no setting for the shop's Retention, and
// neither derives the window from the shop nor refuses. Its help: exit 0
// "the tiers are in agreement".
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

		s.run("reconcile", "--dry-run").is(t, exitOK, "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n")
		s.wantAvailable("phone", 2010, 2010)
	})
}
