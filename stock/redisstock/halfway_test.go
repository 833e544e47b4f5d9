package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A Cluster Deduct that stops between its slot groups (the later group's
// reply lost, or the call ending before it is sent) and is never retried
// leaves its lines to the reclaimer, which returns them at the order's
// deadline: now plus the shortest hold time of its SKUs, even when that
// SKU is in a later slot than the one taken first.
func TestClusterDeductStoppedBetweenGroupsExpiresAtTheOrdersDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		skip bool
	}{{"later group's reply lost", false}, {"later group never sent", true}} {
		t.Run(tc.name, func(t *testing.T) {
			eachCluster(t, func(t *testing.T, fx *fixture) {
				long, short := skusInSlotOrder(t, fx) // the long hold is taken first
				fx.sale(long, 10, 0, time.Hour)
				fx.sale(short, 10, 0, time.Minute)
				start := fx.clock.Now()
				fx.hook.arm(1, 1, tc.skip)
				err := fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(long, 2), it(short, 1)))
				fx.hook.arm(0, 0, false)
				if !errors.Is(err, stock.ErrUnknownOutcome) {
					t.Fatalf("Deduct stopped after its first group: %v, want ErrUnknownOutcome", err)
				}
				fx.want(long, 8, 2, 0)
				info, err := fx.s.Orders(fx.ctx(), []string{"o1"})
				if want := start.Add(time.Minute); err != nil || len(info) != 1 || !info[0].Deadline.Equal(want) {
					t.Fatalf("Orders = %+v, %v; want the order's deadline %v", info, err, want)
				}
				fx.clock.Advance(2 * time.Minute)
				if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
					t.Fatal(err)
				}
				fx.want(long, 10, 0, 0)
				fx.want(short, 10, 0, 0)
				info, err = fx.s.Orders(fx.ctx(), []string{"o1"})
				if err != nil || len(info) != 1 || info[0].State == stock.StateHeld {
					t.Fatalf("Orders after the reclaim = %+v, %v; want nothing held", info, err)
				}
			})
		})
	}
}

// A Cluster Confirm that confirmed the first slot group and stopped (its
// reply lost, never retried) leaves the order half-confirmed until its
// deadline. The reclaimer that returns the held lines then ends the order
// whole, as a Confirm past the deadline would: the confirmed lines are
// expired too, so no unit stays sold for an order that was never sold, and
// a later Confirm or Revert of it moves nothing (a reconciler that counted
// the stranded units back in would otherwise see them returned twice).
func TestClusterConfirmStoppedBetweenGroupsEndsWhole(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 1))), nil, "Deduct")
		fx.hook.arm(0, 1, false)
		err := fx.s.Confirm(fx.ctx(), "o1")
		fx.hook.arm(0, 0, false)
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Confirm with its first group's reply lost: %v, want ErrUnknownOutcome", err)
		}
		fx.want(lo, 8, 0, 2)
		fx.want(hi, 9, 1, 0)
		fx.clock.Advance(2 * time.Minute)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(got) != 1 || got[0].SKU != hi {
			t.Fatalf("ReclaimExpired = %+v, %v; want the held line of %s", got, err, hi)
		}
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
		info, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil || len(info) != 1 || info[0].State != stock.StateExpired {
			t.Fatalf("Orders after the reclaim = %+v, %v; want expired", info, err)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrHoldExpired, "Confirm after the reclaim")
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert after the reclaim")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// The same half-confirmed order, when the reclaimer stops after returning
// the held lines and before it expires the confirmed ones: Orders does not
// report a sale (a reader such as stock/tiered's follow-up would confirm
// the record's copy of an order whose other lines the gate returned), and
// a Confirm of it expires what is left.
func TestClusterHalfConfirmedOrderPastItsDeadlineIsNotASale(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := halfConfirmedStoppedPass(t, fx)
		info, err := fx.s.Orders(fx.ctx(), []string{"o1"})
		if err != nil || len(info) != 1 || info[0].State != stock.StateExpired {
			t.Fatalf("Orders = %+v, %v; want expired", info, err)
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrHoldExpired, "Confirm")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

// halfConfirmedStoppedPass leaves o1, an order of 2 units of lo and 1 of
// hi (two slots, in that order), half-confirmed (its Confirm's first group
// applied, its reply lost) and past its deadline, and runs a reclaim pass
// that returns hi's held line and stops before it ends the order (its last
// call never sent): lo is left 8/0/2, hi 10/0/0.
func halfConfirmedStoppedPass(t *testing.T, fx *fixture) (lo, hi string) {
	t.Helper()
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, time.Minute)
	fx.sale(hi, 10, 0, time.Minute)
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 2), it(hi, 1))), nil, "Deduct")
	fx.hook.arm(0, 1, false)
	if err := fx.s.Confirm(fx.ctx(), "o1"); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Confirm with its first group's reply lost: %v, want ErrUnknownOutcome", err)
	}
	fx.clock.Advance(2 * time.Minute)
	fx.hook.arm(1, 1, true) // the reclaim scripts run, the call that ends the orders is never sent
	_, err := fx.s.ReclaimExpired(fx.ctx(), 10)
	fx.hook.arm(0, 0, false)
	if err == nil {
		t.Fatal("ReclaimExpired whose last call was never sent: nil")
	}
	fx.want(lo, 8, 0, 2)
	fx.want(hi, 10, 0, 0)
	return lo, hi
}
