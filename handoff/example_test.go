package handoff_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The gate answers at once; a Consumer records the order from the queue.
func Example() {
	ctx := context.Background()
	gate, record := memstock.New(stock.SystemClock), memstock.New(stock.SystemClock)
	q := handofftest.NewMemory(30 * time.Second) // a broker adapter, e.g. redisstream.New(...)

	var c *handoff.Consumer
	rec := handoff.NewRecorder(q, gate, handoff.RecorderConfig{Lag: func() time.Duration { return c.Lag() }})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec})
	c, _ = handoff.NewConsumer(q.Source(), flow, handoff.ConsumerConfig{
		Done: func(_ context.Context, m handoff.Message, err error) { fmt.Println("settled", m.Order.ID, err) },
	})
	_ = flow.PutOnSale(ctx, stock.Listing{SKU: "tee", Units: 10, HoldTTL: time.Minute})

	p, err := flow.Place(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "tee", Qty: 2}}})
	fmt.Println(p, err)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	for q.Len() > 0 {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	lv, _ := record.Levels(ctx, "tee")
	fmt.Println("record holds", lv.Held)
	// Output:
	// pending <nil>
	// settled o1 <nil>
	// record holds 2
}
