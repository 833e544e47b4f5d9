package redisstock_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// observe.Batch.Err is "the error the whole batch failed with". A batch
// whose script call's reply is lost failed whole; on a single server the
// report says so, on a Cluster's slot batch it reports success: the slot
// batcher's run sets each call's replies (bind, first), never its err,
// and send reads batch[0].err.
func TestReviewBatchObservedBatchErrorOnSlotBatch(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		var rec observe.Recorder
		cfg := fx.cfg
		cfg.Prefix = ""
		cfg.Observer = rec.Observer()
		s := newStore(t, fx.c, cfg)
		if err := s.PutOnSale(fx.ctx(), stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		fx.hook.arm(0, 1, false)
		err := s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1)))
		fx.hook.arm(0, 0, false)
		unknown(t, err, "Deduct with its reply lost")
		b := rec.Batches()
		if len(b) != 1 {
			t.Fatalf("%d batches reported, want 1", len(b))
		}
		if b[0].Err == nil {
			t.Fatalf("batch whose reply was lost reported as %+v: Err nil", b[0])
		}
	})
}
