package sqlstock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Concurrent buyers of one hot SKU (grouped commits) while every third
// COMMIT's reply is lost: each answer tells the truth about the ledger,
// and retries end with exactly the units held.
func TestLostCommitsInGroups(t *testing.T) {
	forEachServerTx(t, strategies, lostGroups)
}

func lostGroups(t *testing.T, b backend, st sqlstock.Strategy) {
	ctx := context.Background()
	p, open := proxied(t, b)
	s := newStore(t, open(), sqlstock.Config{Dialect: b.dialect, Strategy: st, LockWait: 2 * time.Second, MaxAttempts: 100_000})
	const units, buyers = 30, 60
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: units}); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	p.DropReplies(func(req []byte) bool {
		low := bytes.ToLower(req)
		if bytes.HasSuffix(low, []byte("commit")) || bytes.Contains(low, []byte("commit\x00")) {
			return n.Add(1)%3 == 0
		}
		return false
	})
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Deduct(ctx, stock.Order{ID: fmt.Sprintf("o%d", i), UserID: "u", Items: []stock.Item{{SKU: "hot", Qty: 1}}})
		}()
	}
	wg.Wait()
	p.DropReplies(nil)
	ids := make([]string, buyers)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%d", i)
	}
	infos, err := s.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var held int64
	for i, err := range errs {
		taken := infos[i].State == stock.StateHeld
		if taken {
			held++
		}
		switch {
		case err == nil:
			kinds["nil"]++
			if !taken {
				t.Errorf("o%d: nil, but the ledger says %v", i, infos[i].State)
			}
		case errors.Is(err, stock.ErrUnknownOutcome):
			kinds["unknown"]++
		default:
			kinds[err.Error()]++
			if taken {
				t.Errorf("o%d: %v, but the ledger holds it", i, err)
			}
		}
	}
	t.Logf("dropped %d replies; answers %v", p.Dropped(), kinds)
	lv, _ := s.Levels(ctx, "hot")
	if lv.Held != held || lv.Available+lv.Held != units {
		t.Errorf("levels %+v, ledger holds %d", lv, held)
	}
	for _, id := range ids {
		if err := s.Deduct(ctx, stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: "hot", Qty: 1}}}); err != nil && !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("retry %s: %v", id, err)
		}
	}
	if lv, _ := s.Levels(ctx, "hot"); lv.Available != 0 || lv.Held != units {
		t.Errorf("after retries %+v, want 0 available, %d held", lv, units)
	}
}
