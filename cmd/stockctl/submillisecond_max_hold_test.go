package main

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A shop wired as the README says (tiered default Config, RecordGrace
// zero) lists "phone" through its flow with a hold time and a maximum hold
// time that are not whole milliseconds (two hours and four hours split
// seven ways; stock.Listing's Validate takes them). Both tiers keep what
// the flow wrote, truncated to the millisecond: the gate 1028571ms, max
// 2057142ms; the record 2057142ms, max 3085714ms. Nothing was changed at
// one tier, and the grace is the shop's. The CHANGELOG (Fixed, fx-adopt2)
// says hold times "are now compared as the gate keeps them, truncated to
// the millisecond", and the refusal happens only "when a SKU on both tiers
// has hold times that contradict" the grace (README). So with no
// --record-grace a dry run, a dry warm-up and a put-on-sale of another SKU
// must run as on main, and with --record-grace 0 the pass finds the SKU in
// agreement.
func TestSubMillisecondMaxHoldIsNotAContradiction(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		l := stock.Listing{SKU: "phone", Units: 10, HoldTTL: 2 * time.Hour / 7, MaxHoldTTL: 4 * time.Hour / 7}
		if err := s.flow.PutOnSale(s.ctx, l); err != nil {
			t.Fatal(err)
		}
		g, rec := s.levels("phone")
		t.Logf("gate hold %v max %v; record hold %v max %v", g.HoldTTL, g.MaxHoldTTL, rec.HoldTTL, rec.MaxHoldTTL)

		agree := "checked 1 SKU: 1 in agreement (dry run: nothing changed)\n"
		want := func(r result, code int, stdout string) {
			t.Helper()
			if r.code != code || (stdout != "" && r.out != stdout) {
				t.Errorf("stockctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.args[len(s.conn):], r.code, code, r.out, r.err)
			}
		}
		want(s.run("--record-grace", "0", "reconcile", "--dry-run"), exitOK, agree)
		want(s.run("reconcile", "--dry-run"), exitOK, agree)
		want(s.run("warmup", "--dry-run", "phone"), exitOK, "")
		r := s.run("put-on-sale", "tv", "5", "--hold", "10m")
		if _, onRecord := s.onTiers("tv"); !onRecord {
			t.Errorf("'stockctl put-on-sale tv 5 --hold 10m' (exit %d) did not list tv\nstderr:\n%s", r.code, r.err)
		}
		want(r, exitOK, "")
	})
}

// A README-wired shop lists "tv" for 10m, max 30m; while Redis is down
// its breaker relists it at the record alone with max 40m (the record
// then keeps max 50m, the gate still 30m). Only the maximum hold time
// contradicts the default grace, and a run without --record-grace is
// refused for it (exit 2). The refusal is there to tell the operator
// what the tiers contradict (checkGrace: "SKUs on both tiers whose hold
// times do not map to each other"); inspect's note for the same SKU names
// "max hold 30m0s at the gate, 40m0s from the record's". The refusal must
// name the maximum hold times too, not say that the gate's 10m is what the
// record's 20m gives, which agrees.
func TestGraceRefusalNamesTheMaxHoldThatDisagrees(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		if err := s.flow.PutOnSale(s.ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 30 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := s.flow.Fallback().PutOnSale(s.ctx, stock.Listing{SKU: "tv", Units: 5, HoldTTL: 10 * time.Minute, MaxHoldTTL: 40 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.run("inspect", "tv").exits(t, exitOK, "max hold 30m0s at the gate, 40m0s from the record's")
		s.run("reconcile", "--dry-run").exits(t, exitUsage, "--record-grace", "max hold", "30m")
	})
}
