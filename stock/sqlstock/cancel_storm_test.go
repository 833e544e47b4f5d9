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

// Buyers of one hot SKU whose contexts end at random points of their
// Deducts (queued, grouped, alone, mid-transaction, at COMMIT). Whatever
// the point, every answer must tell the truth about the ledger: nil means
// held; sold out, contention or a bare context error mean nothing was
// taken; only an error matching stock.ErrUnknownOutcome may leave either.
// The stock row agrees with the ledger, and a retry under the same ID
// learns the outcome.
func TestCanceledDeductsTellTheTruth(t *testing.T) {
	forEach(t, cancelStorm)
}

func cancelStorm(t *testing.T, b backend, st sqlstock.Strategy) {
	ctx := context.Background()
	s := newStore(t, b.open(t), sqlstock.Config{Strategy: st, Dialect: b.dialect, MaxAttempts: 1000})
	const units, buyers, rounds = 40, 48, 3
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: units}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		id  string
		err error
	}
	var all []result
	for r := range rounds {
		res := make([]result, buyers)
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%d-o%d", r, i)
				d := time.Duration(rand.IntN(4000)) * time.Microsecond
				cctx, cancel := context.WithTimeout(ctx, d)
				defer cancel()
				res[i] = result{id, s.Deduct(cctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "hot", Qty: 1}}})}
			}()
		}
		wg.Wait()
		all = append(all, res...)
	}
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	// The ledger and the stock row are read in one consistent view: a
	// canceled call's transaction may still commit on the server after
	// its Deduct returned (an unknown outcome), and two separate reads
	// could see it between them.
	view, err := s.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	infos, err := view.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := view.Levels(ctx, []string{"hot"})
	if err != nil {
		t.Fatal(err)
	}
	view.Close()
	var held int64
	kinds := map[string]int{}
	for i, r := range all {
		taken := infos[i].State == stock.StateHeld
		if taken {
			held++
		}
		switch {
		case r.err == nil:
			kinds["nil"]++
			if !taken {
				t.Errorf("%s: Deduct said nil, ledger says %v", r.id, infos[i].State)
			}
		case errors.Is(r.err, stock.ErrUnknownOutcome):
			kinds["unknown"]++
		default:
			kinds[fmt.Sprintf("%T", r.err)]++
			if taken {
				t.Errorf("%s: Deduct failed with %v (%T, not ErrUnknownOutcome), but the ledger holds the order", r.id, r.err, r.err)
			}
		}
	}
	t.Logf("answers: %v; held %d", kinds, held)
	lv := rows[0].Levels
	if lv.Held != held || lv.Available+lv.Held != units || lv.Available < 0 {
		t.Errorf("levels %+v; ledger holds %d of %d units", lv, held, units)
	}
	// A retry of every order with time enough: exactly the units are held.
	for _, r := range all {
		err := s.Deduct(ctx, stock.Order{ID: r.id, Items: []stock.Item{{SKU: "hot", Qty: 1}}})
		if err != nil && !errors.Is(err, stock.ErrSoldOut) {
			t.Errorf("retry of %s: %v", r.id, err)
		}
	}
	lv, _ = s.Levels(ctx, "hot")
	if lv.Available != 0 || lv.Held != units {
		t.Errorf("after retries: levels %+v, want 0 available, %d held", lv, units)
	}
}
