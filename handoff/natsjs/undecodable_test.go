package natsjs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
)

// validatingSettler answers as the flow's Settle does (tiered.Manager
// validates the order first): stock.ErrInvalid for an order that can
// never settle, nil for any other.
type validatingSettler struct{}

func (validatingSettler) Settle(_ context.Context, o stock.Order) error { return o.Validate() }

// handoff's adapter contract (handoff/doc.go, "Writing an adapter"):
// "A payload that cannot be decoded is delivered with an invalid (e.g.
// empty) Order, so the Consumer dead-letters it" — and the Consumer then
// reports it: ConsumerConfig.Done gets an error matching
// handoff.ErrDeadLettered, the Observer a Handoff with DeadLettered (the
// dead-letter alert of otelstock), as for redisstream and
// handofftest.Memory. A Source that dead-lettered such a message itself
// and never handed it over left a dead letter no one hears of.
func TestUndecodablePayloadReachesTheConsumer(t *testing.T) {
	url := serverURL(t)
	js := connect(t, url)
	cfg := config(t, js, 500*time.Millisecond)
	if _, err := natsjs.NewPublisher(ctxT(t), js, cfg); err != nil {
		t.Fatal(err)
	}
	src, err := natsjs.NewSource(ctxT(t), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A payload of another version, or written by hand: not a hand-off.
	if _, err := js.PublishMsg(ctxT(t), &nats.Msg{Subject: cfg.Subject, Data: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var done []error
	c, err := handoff.NewConsumer(src, validatingSettler{}, handoff.ConsumerConfig{
		Done: func(_ context.Context, _ handoff.Message, err error) {
			mu.Lock()
			done = append(done, err)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = c.Run(ctx)
	if ds, err := js.Stream(ctxT(t), cfg.Stream+"_DEAD"); err == nil {
		if info, err := ds.Info(ctxT(t)); err == nil {
			t.Logf("the dead-letter stream holds %d message(s)", info.State.Msgs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 1 || !errors.Is(done[0], handoff.ErrDeadLettered) {
		t.Errorf("Done got %v for the undecodable message; want one error matching handoff.ErrDeadLettered", done)
	}
}
