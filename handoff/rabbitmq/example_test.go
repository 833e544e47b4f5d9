package rabbitmq_test

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The package doc's wiring (compiled, not run: it needs a broker). The
// Recorder's backpressure reads the lag of this process's consumers,
// RecorderConfig.Lag: the Publisher cannot tell the broker's.
func Example_wiring() {
	ctx := context.Background()
	gate, record := memstock.New(stock.SystemClock), memstock.New(stock.SystemClock)

	pub, err := rabbitmq.NewPublisher(ctx, "amqp://guest:guest@127.0.0.1:5672/", rabbitmq.Config{})
	if err != nil {
		return
	}
	defer pub.Close()
	var c *handoff.Consumer // made below: the flow needs the Recorder first
	rec := handoff.NewRecorder(pub, gate, handoff.RecorderConfig{Lag: func() time.Duration { return c.Lag() }})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec})

	src, err := rabbitmq.NewSource(ctx, "amqp://guest:guest@127.0.0.1:5672/", rabbitmq.Config{})
	if err != nil {
		return
	}
	defer src.Close()
	c, err = handoff.NewConsumer(src, flow, handoff.ConsumerConfig{})
	if err != nil {
		return
	}
	go c.Run(ctx)
}
