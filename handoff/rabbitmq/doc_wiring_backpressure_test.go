package rabbitmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

type minuteGate struct{}

func (minuteGate) Levels(context.Context, string) (stock.Levels, error) {
	return stock.Levels{HoldTTL: time.Minute}, nil
}

// blockingFlow is a record that does not answer until released: the
// consumer holds its batch meanwhile.
type blockingFlow struct {
	entered chan struct{}
	release chan struct{}
}

func (f blockingFlow) Settle(ctx context.Context, o stock.Order) error {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	<-f.release
	return nil
}

// The package doc's wiring ("# Wiring": NewRecorder(pub, gate,
// handoff.RecorderConfig{Lag: c.Lag}), a Consumer c on the Source, as
// Example_wiring) and its promise
// ("# Backpressure: no broker lag": "a Recorder over the Publisher applies
// backpressure by handoff.RecorderConfig.Lag alone, this process's
// consumers' measure"), with handoff/doc.go's rule: "while the hand-off
// lags more than a bound [by default half the order's hold time], new
// orders are refused before the gate holds anything". Wired as the doc
// shows, the Recorder refuses a new order while the consumer is behind.
func TestDocWiringAppliesBackpressure(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	pub := publisher(t, url, cfg)
	var c *handoff.Consumer
	rec := handoff.NewRecorder(pub, minuteGate{}, handoff.RecorderConfig{Lag: func() time.Duration { return c.Lag() }})
	flow := blockingFlow{entered: make(chan struct{}, 1), release: make(chan struct{})}
	src := source(t, url, cfg)
	c, err := handoff.NewConsumer(src, flow, handoff.ConsumerConfig{})
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { close(flow.release); cancel(); <-done }()

	// An order handed off 50s ago with a minute's hold: the consumer
	// reaches it with 10s of its hold left.
	sent := time.Now().Add(-50 * time.Second)
	o := stock.Order{ID: "old", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}
	if err := pub.Publish(ctx, handoff.Message{Order: o, Sent: sent, Deadline: sent.Add(time.Minute)}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	select {
	case <-flow.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer did not take the message")
	}
	next := stock.Order{ID: "next", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}
	if err := rec.Admit(ctx, next); !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Admit = %v while the consumer lags %v (bound: half the 1m hold); want ErrBacklog",
			err, c.Lag().Round(time.Second))
	}
}
