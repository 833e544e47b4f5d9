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

// One user's concurrent orders of a limited SKU Y in different SKU sets
// ({Y}, {X, Y}, {Y, Z}: different group lanes, so different transactions)
// are counted one after the other: with a limit of 1, exactly one of each
// user's orders takes.
func TestPerUserLimitAcrossLanes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 100_000})
		for _, l := range []stock.Listing{{SKU: "X", Units: 1000}, {SKU: "Y", Units: 1000, PerUserLimit: 1}, {SKU: "Z", Units: 1000}} {
			if err := s.PutOnSale(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		const users, rounds = 16, 3
		sets := [][]stock.Item{{{SKU: "Y", Qty: 1}}, {{SKU: "X", Qty: 1}, {SKU: "Y", Qty: 1}}, {{SKU: "Y", Qty: 1}, {SKU: "Z", Qty: 1}}}
		type res struct {
			user string
			err  error
		}
		out := make(chan res, users*rounds*len(sets))
		var wg sync.WaitGroup
		for u := range users {
			for r := range rounds {
				for k, items := range sets {
					wg.Add(1)
					go func() {
						defer wg.Done()
						user := fmt.Sprint("u", u)
						out <- res{user, s.Deduct(ctx, stock.Order{ID: fmt.Sprintf("%s-%d-%d", user, r, k), UserID: user, Items: items})}
					}()
				}
			}
		}
		wg.Wait()
		close(out)
		ok := map[string]int{}
		for r := range out {
			switch {
			case r.err == nil:
				ok[r.user]++
			case errors.Is(r.err, stock.ErrLimitReached):
			default:
				t.Errorf("%s: %v", r.user, r.err)
			}
		}
		for u := range users {
			user := fmt.Sprint("u", u)
			n, _ := s.UserUnits(ctx, "Y", user)
			if ok[user] != 1 || n != 1 {
				t.Errorf("%s: %d orders took, holds %d of Y; limit 1", user, ok[user], n)
			}
		}
		if lv, _ := s.Levels(ctx, "Y"); lv.Held != users {
			t.Errorf("Y %+v, want %d held", lv, users)
		}
	})
}
