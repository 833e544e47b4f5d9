package memstock_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

func TestDiffExtendOddTimes(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: stock.MaxHoldTTL})
		deduct(r, one("o1", "", "a", 1))
		r.do("extend zero", r.m.ExtendHold(r.ctx, "o1", time.Time{}))
		r.do("extend 1970", r.m.ExtendHold(r.ctx, "o1", time.Unix(0, 0)))
		r.do("extend far", r.m.ExtendHold(r.ctx, "o1", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)))
		r.do("extend maxint", r.m.ExtendHold(r.ctx, "o1", time.Unix(math.MaxInt64/1000, 0)))
		r.do("extend sub-ms", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(time.Minute+500*time.Microsecond)))
		r.do("extend +1ms", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(time.Minute+time.Millisecond)))
		loc := time.FixedZone("x", 3600)
		r.do("extend zone", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().In(loc).Add(2*time.Minute)))
		r.orders("o1")
		r.do("extend bound", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(stock.MaxHoldTTL)))
		r.do("extend bound+1ms", r.m.ExtendHold(r.ctx, "o1", r.clock.Now().Add(stock.MaxHoldTTL+time.Millisecond)))
		r.orders("o1")
	})
}

func TestDiffOrdersMany(t *testing.T) {
	diff(t, func(r *rec) {
		put(r, stock.Listing{SKU: "a", Units: 10})
		deduct(r, one("o1", "", "a", 1))
		ids := []string{"o1", "o1", "x"}
		for i := range 3000 {
			ids = append(ids, fmt.Sprint("m", i))
		}
		infos, err := r.m.Orders(r.ctx, ids)
		r.log("orders: %d %s", len(infos), class(err))
		if err == nil {
			r.log("first: %v %v %v", infos[0].State, infos[1].State, infos[2].State)
		}
		infos, err = r.m.Orders(r.ctx, nil)
		r.log("orders nil: %d %v %s", len(infos), infos == nil, class(err))
		_, err = r.m.ReclaimExpired(r.ctx, math.MaxInt)
		r.do("reclaim maxint", err)
	})
}
