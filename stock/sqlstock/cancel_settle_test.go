package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Confirm, Revert and Restock whose contexts end at random points: an
// answer other than nil or stock.ErrUnknownOutcome means the call applied
// nothing; nil means it applied.
func TestCanceledSettleCallsTellTheTruth(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		ctx := context.Background()
		s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 1000})
		const orders = 60
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1000}); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, orders)
		for i := range ids {
			ids[i] = fmt.Sprint("o", i)
			if err := s.Deduct(ctx, stock.Order{ID: ids[i], Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, orders)
		rerrs := make([]error, orders)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(2)
			go func() {
				defer wg.Done()
				c, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				defer cancel()
				if i%2 == 0 {
					errs[i] = s.Confirm(c, ids[i])
				} else {
					errs[i] = s.Revert(c, ids[i])
				}
			}()
			go func() {
				defer wg.Done()
				c, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				defer cancel()
				rerrs[i] = s.Restock(c, stock.Restock{OpID: ids[i], SKU: "a", Units: 1})
			}()
		}
		wg.Wait()
		infos, err := s.Orders(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.View(ctx)
		if err != nil {
			t.Fatal(err)
		}
		restocked := map[string]bool{}
		rs, err := v.Restocks(ctx, []string{"a"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			restocked[r.ID] = true
		}
		_ = v.Close()
		var sold, held, added int64
		for i, in := range infos {
			want := stock.StateConfirmed
			if i%2 == 1 {
				want = stock.StateReverted
			}
			switch in.State {
			case stock.StateConfirmed:
				sold++
			case stock.StateHeld:
				held++
			}
			if restocked[ids[i]] {
				added++
			}
			switch err := errs[i]; {
			case err == nil && in.State != want:
				t.Errorf("%s: nil but the ledger says %v", ids[i], in.State)
			case err != nil && !errors.Is(err, stock.ErrUnknownOutcome) && in.State != stock.StateHeld:
				t.Errorf("%s: %v (%T), but the ledger says %v", ids[i], err, err, in.State)
			}
			switch err := rerrs[i]; {
			case err == nil && !restocked[ids[i]]:
				t.Errorf("restock %s: nil but not applied", ids[i])
			case err != nil && !errors.Is(err, stock.ErrUnknownOutcome) && restocked[ids[i]]:
				t.Errorf("restock %s: %v (%T), but applied", ids[i], err, err)
			}
		}
		lv, _ := s.Levels(ctx, "a")
		if lv.Held != held || lv.Sold != sold || lv.Available+lv.Held+lv.Sold != 1000+added {
			t.Errorf("levels %+v; ledger held %d sold %d, restocked %d", lv, held, sold, added)
		}
	})
}
