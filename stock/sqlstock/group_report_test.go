package sqlstock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A group is reported to the Observer before any Deduct in it returns:
// once every Deduct has returned, the reported groups hold every Deduct,
// even when the Observer is slow.
func TestGroupReportedBeforeItsCallsReturn(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			var rec observe.Recorder
			obs := rec.Observer()
			record := obs.Batch
			obs.Batch = func(ctx context.Context, ob observe.Batch) {
				time.Sleep(20 * time.Millisecond)
				record(ctx, ob)
			}
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect, Observer: obs})
			if err := s.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 1000}); err != nil {
				t.Fatal(err)
			}
			const buyers = 40
			var wg sync.WaitGroup
			for i := range buyers {
				wg.Go(func() {
					id := "o" + strconv.Itoa(i)
					if err := s.Deduct(t.Context(), one(id, "u"+id, 1)); err != nil {
						t.Errorf("Deduct %s: %v", id, err)
					}
				})
			}
			wg.Wait()
			sized := 0
			for _, g := range rec.Batches() {
				sized += g.Size
			}
			if sized != buyers {
				t.Fatalf("once every Deduct returned, the reported groups held %d Deducts, want %d", sized, buyers)
			}
		})
	}
}
