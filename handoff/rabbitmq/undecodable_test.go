package rabbitmq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/internal/testdb"
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
// reports it (ConsumerConfig.Done with handoff.ErrDeadLettered, the
// Observer's Handoff.DeadLettered). A Source that dead-lettered such a
// message itself and never handed it over left nothing to report it.
func TestUndecodablePayloadReachesTheConsumer(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	src := source(t, url, cfg)
	if err := adminChannel(t, url).PublishWithContext(ctxT(t), "", cfg.Queue, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("{not json")}); err != nil {
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
	if n, err := holds(t, url, cfg.DeadQueue); err == nil {
		t.Logf("the dead-letter queue holds a message: %v", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 1 || !errors.Is(done[0], handoff.ErrDeadLettered) {
		t.Errorf("Done got %v for the undecodable message; want one error matching handoff.ErrDeadLettered", done)
	}
}
