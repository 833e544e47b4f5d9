package redisstock_test

import (
	"testing"
	"time"
)

// The order of partlyLostConfirm, left at rest: once Retention and the
// attempt lease have passed, with reclaim passes after them, Audit finds
// nothing stored per order, or reports what is neither ended nor live.
func TestAuditAfterAPartialLastCallConfirm(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		partlyLostConfirm(t, fx)
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
