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
		var rec observe.Recorder
		cfg := fx.cfg
		cfg.Observer = slowBatches(&rec)
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
		if sized := batched(rec.Batches()); sized != buyers {
			t.Fatalf("once every Deduct returned, the reported batches held %d Deducts, want %d", sized, buyers)
		}
	})
}

// slowBatches is rec's Observer with a Batch hook that takes 20ms before
// it records.
func slowBatches(rec *observe.Recorder) observe.Observer {
	o := rec.Observer()
	record := o.Batch
	o.Batch = func(ctx context.Context, b observe.Batch) {
		time.Sleep(20 * time.Millisecond)
		record(ctx, b)
	}
	return o
}

// batched is the number of calls in bs.
func batched(bs []observe.Batch) int {
	n := 0
	for _, b := range bs {
		n += b.Size
	}
	return n
}
