package redisstock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// A batch is reported to the Observer before any Deduct in it returns: once
// every Deduct has returned, the reported batches hold every Deduct, even
// when the Observer is slow. (A tracer relies on it: a batch span is the
// child of a Deduct's span and must end before it.)
func TestBatchReportedBeforeItsCallsReturn(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		var (
			mu    sync.Mutex
			sized int
		)
		cfg := fx.cfg
		cfg.Observer = observe.Observer{Batch: func(_ context.Context, b observe.Batch) {
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			sized += b.Size
			mu.Unlock()
		}}
		s := newStore(t, fx.c, cfg)
		if err := s.PutOnSale(fx.ctx(), stock.Listing{SKU: "hot", Units: 1000, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		const buyers = 40
		var wg sync.WaitGroup
		for i := range buyers {
			wg.Go(func() {
				id := "o" + strconv.Itoa(i)
				is(t, s.Deduct(fx.ctx(), ord(id, "u"+id, it("hot", 1))), nil, "Deduct "+id)
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if sized != buyers {
			t.Fatalf("once every Deduct returned, the reported batches held %d Deducts, want %d", sized, buyers)
		}
	})
}
