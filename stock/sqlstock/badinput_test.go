package sqlstock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Bad input never panics and never writes: each refused call leaves the
// levels as they were. A restock past stock.MaxUnits is stock.ErrInvalid
// (the doc of MaxUnits).
func TestBadInputWritesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect})
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "max", Units: stock.MaxUnits}); err != nil {
			t.Fatal(err)
		}
		if err := s.Deduct(ctx, stock.Order{ID: "held", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("x", stock.MaxIDLen+1)
		bad := map[string]func() error{
			"empty order ID": func() error { return s.Deduct(ctx, stock.Order{Items: []stock.Item{{SKU: "a", Qty: 1}}}) },
			"zero qty":       func() error { return s.Deduct(ctx, stock.Order{ID: "z", Items: []stock.Item{{SKU: "a", Qty: 0}}}) },
			"negative qty":   func() error { return s.Deduct(ctx, stock.Order{ID: "n", Items: []stock.Item{{SKU: "a", Qty: -1}}}) },
			"huge qty": func() error {
				return s.Deduct(ctx, stock.Order{ID: "h", Items: []stock.Item{{SKU: "a", Qty: math.MaxInt64}}})
			},
			"duplicate SKU": func() error {
				return s.Deduct(ctx, stock.Order{ID: "d", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "a", Qty: 1}}})
			},
			"long SKU": func() error { return s.Deduct(ctx, stock.Order{ID: "l", Items: []stock.Item{{SKU: long, Qty: 1}}}) },
			"nul SKU": func() error {
				return s.Deduct(ctx, stock.Order{ID: "nul", Items: []stock.Item{{SKU: "a\x00", Qty: 1}}})
			},
			"bad utf8 SKU": func() error { return s.Deduct(ctx, stock.Order{ID: "u", Items: []stock.Item{{SKU: "a\xff", Qty: 1}}}) },
			"negative TTL": func() error {
				return s.Deduct(ctx, stock.Order{ID: "t", HoldTTL: -time.Second, Items: []stock.Item{{SKU: "a", Qty: 1}}})
			},
			"no items":         func() error { return s.Deduct(ctx, stock.Order{ID: "e"}) },
			"restock past max": func() error { return s.Restock(ctx, stock.Restock{OpID: "k", SKU: "max", Units: 1}) },
			"revert items too many": func() error {
				return s.RevertItems(ctx, stock.Return{OpID: "r", OrderID: "held", Items: []stock.Item{{SKU: "a", Qty: 2}}})
			},
			"revert items other SKU": func() error {
				return s.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: "held", Items: []stock.Item{{SKU: "max", Qty: 1}}})
			},
			"extend empty ID": func() error { return s.ExtendHold(ctx, "", time.Now().Add(time.Hour)) },
			"put on sale negative": func() error {
				return s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: -1})
			},
			"reclaim 0":     func() error { _, err := s.ReclaimExpired(ctx, 0); return err },
			"orders bad ID": func() error { _, err := s.Orders(ctx, []string{"held", ""}); return err },
			"snapshot bad":  func() error { _, err := s.Snapshot(ctx, []string{"a", "b c"}); return err },
		}
		for name, f := range bad {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s panicked: %v", name, r)
					}
				}()
				err = f()
			}()
			if err == nil || errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrContention) {
				t.Errorf("%s: %v; want a refusal", name, err)
			}
		}
		if lv, _ := s.Levels(ctx, "a"); lv.Available != 9 || lv.Held != 1 {
			t.Errorf("a after bad input: %+v, want 9 available, 1 held", lv)
		}
		if lv, _ := s.Levels(ctx, "max"); lv.Available != stock.MaxUnits {
			t.Errorf("max after bad input: %+v, want %d available", lv, int64(stock.MaxUnits))
		}
		if in, _ := s.Orders(ctx, []string{"held"}); len(in) != 1 || in[0].State != stock.StateHeld || len(in[0].Returned) != 0 {
			t.Errorf("order after bad input: %+v", in)
		}
	})
}
