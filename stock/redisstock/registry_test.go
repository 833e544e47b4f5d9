package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// A rebuild that recreates the registry after the Redis lost its data
// rebuilds some SKUs, not all: until a full pass says every SKU was
// visited, a SKU it has not rebuilt yet is still lost (ErrUnavailable),
// not a SKU never put on sale.
func TestPartialRebuildKeepsOtherSKUsLost(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		for _, k := range []string{":{a}:state", ":{b}:state", ":skus"} { // one slot each
			if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+k).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := fx.s.Mark(fx.ctx()); err != nil {
			t.Fatal(err)
		}
		out, err := fx.s.Rebuild(fx.ctx(), []redisstock.Rebuild{{Listing: stock.Listing{SKU: "b", Units: 7, HoldTTL: time.Minute}}})
		if err != nil || len(out) != 1 {
			t.Fatalf("Rebuild(b) = %v, %v", out, err)
		}
		err = fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1)))
		if !errors.Is(err, stock.ErrUnavailable) || stock.IsBusiness(err) {
			t.Fatalf("Deduct of a SKU not rebuilt yet: %v, want stock.ErrUnavailable", err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u1", it("b", 1))), nil, "Deduct of the rebuilt SKU")
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("ReclaimExpired with the registry marked incomplete: %v, %v", got, err)
		}
		if err := fx.s.Calibrated(fx.ctx()); err != nil {
			t.Fatal(err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u1", it("a", 1))), stock.ErrUnknownSKU, "Deduct after a full pass")
		fx.want("b", 6, 1, 0)
	})
}
