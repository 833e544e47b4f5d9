package memstock_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// HoldExtender.ExtendHold "returns ErrHoldTooLong for a deadline past the
// order's bound"; nil means the deadline already reaches the one asked
// for. A deadline far past every bound (its milliseconds beyond an int64,
// or a Lua number's exact range) must not wrap around to the distant past
// and be answered nil: the caller would believe the hold extended while it
// still ends a minute from now.
func TestExtendFarDeadlineIsTooLong(t *testing.T) {
	type ext interface {
		stock.Manager
		stock.HoldExtender
		stock.OrderReader
	}
	for _, b := range []struct {
		name string
		new  func(*testing.T, *stocktest.Clock) ext
	}{
		{"memstock", func(t *testing.T, c *stocktest.Clock) ext { return newMem(t, c) }},
		{"redisstock", func(t *testing.T, c *stocktest.Clock) ext { return newRedis(t, c) }},
		{"sqlstock-sqlite", func(t *testing.T, c *stocktest.Clock) ext { return newSQLite(t, c) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			c := stocktest.NewClock(stocktest.Epoch)
			m := b.new(t, c)
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := m.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			for _, d := range []time.Time{time.Unix(math.MaxInt64/2, 0), time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)} {
				if err := m.ExtendHold(ctx, "o1", d); !errors.Is(err, stock.ErrHoldTooLong) {
					t.Errorf("ExtendHold to %v: %v, want ErrHoldTooLong", d, err)
				}
			}
			infos, err := m.Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			if want := stocktest.Epoch.Add(time.Minute); !infos[0].Deadline.Equal(want) {
				t.Errorf("deadline %v, want %v", infos[0].Deadline, want)
			}
		})
	}
}
