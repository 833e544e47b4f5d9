package natsjs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// The Publisher is a handoff.OldestReader: the hand-off's backpressure
// reads the stream's lag, across every node. With an hour-old message
// waiting in the stream and a 1s MaxLag, a Recorder over the Publisher
// (consumers on other nodes: no in-process Lag) refuses new orders with
// ErrBacklog; on an empty stream Oldest tells there is none.
func TestRecorderOverThePublisherRefusesWhileTheStreamLags(t *testing.T) {
	ctx := context.Background()
	js := connect(t, serverURL(t))
	cfg := config(t, js, 500*time.Millisecond)
	pub, err := natsjs.NewPublisher(ctxT(t), js, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	if _, err := natsjs.NewSource(ctxT(t), js, cfg); err != nil { // the consumer exists, and is stuck elsewhere
		t.Fatalf("NewSource: %v", err)
	}
	if r, ok := any(pub).(handoff.OldestReader); !ok {
		t.Fatal("Publisher is not a handoff.OldestReader")
	} else if sent, ok, err := r.Oldest(ctx); ok || err != nil {
		t.Fatalf("Oldest of an empty stream = %v, %v, %v; want none", sent, ok, err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	old := handoff.Message{Order: stock.Order{ID: "old", Items: []stock.Item{{SKU: "a", Qty: 1}}},
		Sent: now.Add(-time.Hour), Deadline: now.Add(-time.Hour + time.Minute)}
	if err := pub.Publish(ctx, old); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	clock := stocktest.NewClock(now)
	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	rec := handoff.NewRecorder(pub, gate, handoff.RecorderConfig{Clock: clock, MaxLag: time.Second})
	err = rec.Admit(ctx, stock.Order{ID: "new", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	if !errors.Is(err, handoff.ErrBacklog) {
		_, isReader := any(pub).(handoff.OldestReader)
		t.Fatalf("Admit with a message an hour old in the stream and MaxLag 1s = %v (Recorder.Lag %v; Publisher is an OldestReader: %v); want ErrBacklog",
			err, rec.Lag(ctx), isReader)
	}
}
