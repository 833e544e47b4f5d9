package redisstock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// An order whose own hold time passes its SKUs' maximum is
// stock.ErrHoldTooLong with nothing taken. On several Cluster slots the
// check runs after every group was taken (check flag '0'), and is skipped
// for an attempt that found records of the order ("a repeat"). When the
// first attempt stops after its first group (reply of the second lost:
// stock.ErrUnknownOutcome), its lines are held with a deadline past their
// bound, and the caller's retry finds them, skips the check and answers
// nil: the order is held for its too-long hold time, past the bound
// ExtendHold itself may never pass. The same order on one server (or one
// slot) is refused, on the first call and on every retry.
func TestReviewBatchRetryOfTooLongMultiSlotOrderIsRefused(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		for _, sku := range []string{lo, hi} {
			if err := fx.s.PutOnSale(fx.ctx(), stock.Listing{SKU: sku, Units: 10, HoldTTL: 10 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		o := ord("o1", "u1", it(lo, 2), it(hi, 1))
		o.HoldTTL = 2 * time.Hour
		fx.hook.arm(1, 1, false) // the second group runs, its reply is lost
		err := fx.s.Deduct(fx.ctx(), o)
		fx.hook.arm(0, 0, false)
		unknown(t, err, "Deduct stopped after its first group")
		err = fx.s.Deduct(fx.ctx(), o)
		info, _ := fx.s.Orders(fx.ctx(), []string{"o1"})
		is(t, err, stock.ErrHoldTooLong, "retried Deduct of the too-long order (Orders: "+rbInfo(info)+")")
		fx.want(lo, 10, 0, 0)
		fx.want(hi, 10, 0, 0)
	})
}

func rbInfo(info []stock.OrderInfo) string {
	if len(info) == 0 {
		return "none"
	}
	return fmt.Sprintf("%v until %v", info[0].State, info[0].Deadline.Format(time.TimeOnly))
}
