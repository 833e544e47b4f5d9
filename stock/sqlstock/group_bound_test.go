package sqlstock_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A grouped Deduct answers within Store.AnswerBound however many groups
// queue ahead of it: while a writer outside the Store holds a row, a
// caller queued behind the lane's groups does not wait for all of them
// in turn.
func TestQueuedDeductAnswersWithinAnswerBound(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 32)
	ctx := context.Background()
	const lockWait = 300 * time.Millisecond
	table := testdb.Unique("sgs")
	s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, LockWait: lockWait, MaxGroup: 2})
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 1000, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// A writer outside the Store holds a's row for the whole test.
	w, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Rollback() }()
	if _, err := w.ExecContext(ctx, "UPDATE "+quote(sqlstock.Postgres, table)+" SET available = available WHERE sku = $1", "a"); err != nil {
		t.Fatal(err)
	}
	const buyers = 12
	took := make([]time.Duration, buyers)
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[i] = s.Deduct(ctx, stock.Order{ID: "o" + string(rune('a'+i)), UserID: "u",
				Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	bound := s.AnswerBound()
	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	t.Logf("answer times: %v (AnswerBound %v)", sorted, bound)
	for i := range buyers {
		if took[i] > bound+200*time.Millisecond {
			t.Errorf("buyer %d answered %v after %v; AnswerBound is %v (LockWait %v)", i, errs[i], took[i].Round(time.Millisecond), bound, lockWait)
		}
	}
}
