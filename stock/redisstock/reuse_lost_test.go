package redisstock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// On a Cluster a Deduct binds its order ID before it takes. An order ID
// used again after Retention (the old order confirmed behind a live hold,
// its record deleted) by an order whose attempt bound the ID and stopped
// before its take (a crashed caller: the entry stays for the attempt
// lease) must not make Snapshot report the old hold as Lost, a hold "whose
// line record is gone (keys deleted by hand or a partial flush)": nothing
// was lost, the old order was paid and the new one holds nothing on the
// SKU. (Were a Cluster's holds placed in the hold queue, which keeps an
// ended hold's entry until the holds before it leave, it would.)
func TestSnapshotOfAReusedClusterIDBoundButNotTakenIsNotLost(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		reusedBoundNotTaken(t, fx)
		if fx.hasRecord("a", "x") {
			t.Fatal("x has a record of a: the take was sent")
		}
		sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(sn[0].Holds) != 1 || sn[0].Holds[0].OrderID != "live" || sn[0].Held != 1 {
			t.Fatalf("Snapshot holds %+v, held %d; want live's 1", sn[0].Holds, sn[0].Held)
		}
		if len(sn[0].Lost) != 0 {
			t.Fatalf("Snapshot Lost %q: x's hold of a was confirmed and its record deleted after Retention, "+
				"and the new x holds nothing of a; no record was lost", sn[0].Lost)
		}
	})
}

// The same sequence on one server: the entry of a new order is written in
// the script that takes its lines, so no entry names the SKU without a
// record, and Snapshot reports nothing lost.
func TestSnapshotOfAReusedIDOnOneServerIsNotLost(t *testing.T) {
	for _, b := range backends() {
		if b.name != "miniredis" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			fx := newFixture(t, b)
			endBehindLiveHold(t, fx, time.Hour, "x", 3*redisstock.MinRetention)
			fx.hook.arm(0, 1, true)
			_ = fx.s.Deduct(fx.ctx(), ord("x", "u3", it("a", 1)))
			fx.hook.arm(0, 0, false)
			sn, err := fx.s.Snapshot(fx.ctx(), []redisstock.SnapshotRequest{{SKU: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(sn[0].Lost) != 0 || !slices.ContainsFunc(sn[0].Holds, func(h redisstock.Hold) bool { return h.OrderID == "live" }) {
				t.Fatalf("Snapshot holds %+v, Lost %q; want live held, nothing lost", sn[0].Holds, sn[0].Lost)
			}
		})
	}
}

// The same without a crash: a Snapshot that runs while the new order's
// Deduct is between its bind and its take (a window every Cluster Deduct
// has) reports nothing lost.
func TestSnapshotBetweenABindAndItsTakeOfAReusedClusterIDIsNotLost(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		endBehindLiveHold(t, fx, time.Hour, "x", 3*redisstock.MinRetention)
		var lost []string
		var serr error
		fx.c.AddHook(&beforeTake{f: func() {
			sn, err := fx.s.Snapshot(context.Background(), []redisstock.SnapshotRequest{{SKU: "a"}})
			if serr = err; err == nil {
				lost = sn[0].Lost
			}
		}})
		is(t, fx.s.Deduct(fx.ctx(), ord("x", "u3", it("a", 1))), nil, "Deduct x again")
		if serr != nil {
			t.Fatal(serr)
		}
		if len(lost) != 0 {
			t.Fatalf("Snapshot between the new x's bind and take: Lost %q; x's old hold was confirmed, "+
				"its record deleted after Retention, and no record was lost", lost)
		}
	})
}

// reusedBoundNotTaken ends x's hold of a behind a live hold (live, an
// hour), lets its record go after Retention, and deducts x again, as
// another order whose attempt binds the ID and stops before its take (its
// take never sent).
func reusedBoundNotTaken(t *testing.T, fx *fixture) {
	t.Helper()
	endBehindLiveHold(t, fx, time.Hour, "x", 3*redisstock.MinRetention)
	fx.hook.arm(0, 1, true)
	err := fx.s.Deduct(fx.ctx(), ord("x", "u3", it("a", 1)))
	fx.hook.arm(0, 0, false)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Deduct whose take was not sent: %v, want an unknown outcome", err)
	}
}

// After that sequence the reclaimer still settles everything: once every
// hold's deadline, the attempt lease and Retention have passed, Audit
// finds nothing and the prefix stores nothing per order.
func TestClusterReusedIDWhoseAttemptStoppedSettlesAtRest(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		reusedBoundNotTaken(t, fx)
		elapse(fx, time.Hour+stock.DefaultHoldTTL)
		for range 5 {
			fx.reclaim()
		}
		elapse(fx, 2*time.Minute)
		for range 5 {
			fx.reclaim()
		}
		orphans, stored, err := fx.s.Audit(fx.ctx())
		if err != nil || len(orphans) != 0 || stored != 0 {
			t.Fatalf("Audit at rest = %q, %d stored, %v; want nothing", orphans, stored, err)
		}
		fx.want("a", 9, 0, 1)
	})
}
