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

type zzSettler struct{}

func (zzSettler) Settle(context.Context, stock.Order) error { return nil }

// handoff's adapter contract (handoff/doc.go, "Writing an adapter"):
// "A payload that cannot be decoded is delivered with an invalid (e.g.
// empty) Order, so the Consumer dead-letters it" — and the Consumer then
// reports it (ConsumerConfig.Done with handoff.ErrDeadLettered, the
// Observer's Handoff.DeadLettered). The rabbitmq Source dead-letters such
// a message itself and never hands it over: nothing reports it.
func TestZZUndecodablePayloadReachesTheConsumer(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	src := source(t, url, cfg)
	if err := adminChannel(t, url).PublishWithContext(ctxT(t), "", cfg.Queue, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var done []error
	c, err := handoff.NewConsumer(src, zzSettler{}, handoff.ConsumerConfig{
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
