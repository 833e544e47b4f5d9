package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// 150 concurrent two-line orders (X and Y) of 50 users, 3 each; X has 80
// units, Y plenty with a per-user limit of 2. Exactly 80 orders take both
// lines, X ends at 0, Y holds exactly 80, no user holds more than 2 of Y,
// and every refusal is sold out or limit reached.
func TestGroupedTwoLineOrdersExact(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 100_000})
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "X", Units: 80}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "Y", Units: 1000, PerUserLimit: 2}); err != nil {
			t.Fatal(err)
		}
		const users, each = 50, 3
		ok := buyAtOnce(t, users*each, func(i int) error {
			return s.Deduct(ctx, stock.Order{ID: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i%users),
				Items: []stock.Item{{SKU: "Y", Qty: 1}, {SKU: "X", Qty: 1}}})
		})
		x, _ := s.Levels(ctx, "X")
		y, _ := s.Levels(ctx, "Y")
		if ok != 80 || x.Available != 0 || x.Held != 80 || y.Held != 80 || y.Available != 920 {
			t.Errorf("%d orders took; X %+v, Y %+v; want 80, X 0 available 80 held, Y 920 available 80 held", ok, x, y)
		}
		for u := range users {
			if n, err := s.UserUnits(ctx, "Y", fmt.Sprintf("u%d", u)); err != nil || n > 2 {
				t.Errorf("user u%d holds %d of Y (limit 2), %v", u, n, err)
			}
		}
	})
}

// buyAtOnce runs the n orders buy(0) .. buy(n-1) at once and returns how
// many were taken; an order may be refused as sold out or past its
// user's limit, and any other answer fails the test.
func buyAtOnce(t *testing.T, n int, buy func(i int) error) int {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = buy(i)
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
		default:
			t.Errorf("order %d: %v", i, err)
		}
	}
	return ok
}
