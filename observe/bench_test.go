package observe_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

// BenchmarkZeroObserver measures what an unset Observer adds to a call
// (Track and Done, as every instrumented method runs them) beside a
// memstock Deduct, the cheapest call it wraps, in the same loop, and
// reports the first as a share of the second:
//
//	go test -run '^$' -bench ZeroObserver -benchmem ./observe/
func BenchmarkZeroObserver(b *testing.B) {
	var o observe.Observer
	m := memstock.New(nil)
	ctx := context.Background()
	if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1 << 40}); err != nil {
		b.Fatal(err)
	}
	const tracks = 100 // per iteration, so the clock's cost is spread thin
	var inTrack, inDeduct time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		for range tracks {
			c, tr := o.Track(ctx, "memstock", observe.OpDeduct, 1)
			tr.Done(c.Err())
		}
		t1 := time.Now()
		if err := m.Deduct(ctx, stock.Order{ID: "o" + strconv.Itoa(n), Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
			b.Fatal(err)
		}
		inTrack += t1.Sub(t0)
		inDeduct += time.Since(t1)
		n++
	}
	perTrack := float64(inTrack.Nanoseconds()) / float64(n*tracks)
	perDeduct := float64(inDeduct.Nanoseconds()) / float64(n)
	b.ReportMetric(perTrack, "zero-observer-ns/call")
	b.ReportMetric(perDeduct, "memstock-deduct-ns/op")
	b.ReportMetric(100*perTrack/perDeduct, "overhead-%")
}

// TestZeroObserverDoesNotAllocate is the allocation half of the promise.
func TestZeroObserverDoesNotAllocate(t *testing.T) {
	var o observe.Observer
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		c, tr := o.Track(ctx, "memstock", observe.OpDeduct, 1)
		tr.Done(c.Err())
		o.SendBatch(ctx, observe.Batch{})
	}); n != 0 {
		t.Fatalf("the zero Observer allocates %v times per call", n)
	}
}
