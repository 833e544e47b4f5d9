package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// The order of TestConfirmRetryAfterAPartialLastCallEndsEveryLine,
// confirmed by the retry, left at rest: once Retention and the attempt
// lease have passed, with reclaim passes after them, Audit finds nothing
// stored per order, or reports what is neither ended nor live.
func TestAuditAfterAPartialLastCallConfirm(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Minute})
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Hour)
		fx.sale(hi, 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		fx.c.AddHook(&loseOne{order: "o1", sku: lo})
		if err := fx.s.Confirm(fx.ctx(), "o1"); err == nil {
			t.Fatal("Confirm whose last call lost a group: nil")
		}
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm retried")
		for range 3 {
			elapse(fx, 2*time.Hour)
			fx.reclaim()
		}
		orphans, stored, err := fx.s.Audit(fx.ctx())
		if err != nil {
			t.Fatal(err)
		}
		if stored != 0 && len(orphans) == 0 {
			t.Fatalf("Audit at rest: %d items stored per order, none reported", stored)
		}
	})
}
