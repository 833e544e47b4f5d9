package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// After the sequence of the Lost tests (an ended hold behind a live one,
// its ID bound again by an attempt that stopped before its take), the
// reclaimer still settles everything: once every hold's deadline, the
// attempt lease and Retention have passed, Audit finds nothing and the
// prefix stores nothing per order.
func TestClusterReusedIDWhoseAttemptStoppedSettlesAtRest(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		endBehindLiveHold(t, fx, time.Hour, "x", 3*redisstock.MinRetention)
		fx.hook.arm(0, 1, true)
		err := fx.s.Deduct(fx.ctx(), ord("x", "u3", it("a", 1)))
		fx.hook.arm(0, 0, false)
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("Deduct whose take was not sent: %v", err)
		}
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
