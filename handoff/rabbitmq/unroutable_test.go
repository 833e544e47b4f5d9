package rabbitmq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

// errCannotSettle is the reason the tests dead-letter with.
var errCannotSettle = errors.New("cannot settle")

// adminChannel is a channel of the test's own on the broker at url: a
// passive declare of a missing queue closes it, so take one per look.
func adminChannel(t *testing.T, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return ch
}

// deleteQueue deletes queue behind the clients' backs, as an operator or a
// policy would.
func deleteQueue(t *testing.T, url, queue string) {
	t.Helper()
	if _, err := adminChannel(t, url).QueueDelete(queue, false, false, false); err != nil {
		t.Fatalf("QueueDelete: %v", err)
	}
}

// holds reports whether queue exists and holds a message.
func holds(t *testing.T, url, queue string) (bool, error) {
	t.Helper()
	q, err := adminChannel(t, url).QueueDeclarePassive(queue, true, false, false, false, nil)
	return err == nil && q.Messages > 0, err
}

// Publish does not return nil for a message no queue holds: once the
// hand-off's queue is gone behind the Publisher's open channel, the
// broker returns the message (it is published mandatory), and Publish
// fails, so the tiered flow does not tell the buyer yes for an order that
// never reaches the record.
func TestPublishToAMissingQueueFails(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	pub := publisher(t, url, cfg)
	deleteQueue(t, url, cfg.Queue)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := handoff.Message{Order: stock.Order{ID: "lost-1", Items: []stock.Item{{SKU: "sku", Qty: 1}}}, Sent: time.Now()}
	perr := pub.Publish(ctx, m)

	// Where is the message? Only a re-declared queue could hold it.
	held, _ := holds(t, url, cfg.Queue)
	if perr == nil && !held {
		t.Fatalf("Publish returned nil, but no queue holds order %s (queue %s deleted: the broker confirmed an unroutable message); want an error", m.Order.ID, cfg.Queue)
	}
	// The next Publish declares the queue again and is held.
	m.Order.ID = "lost-2"
	if err := pub.Publish(ctx, m); err != nil {
		t.Fatalf("Publish after a returned one = %v; want nil on a channel that declared the queue again", err)
	}
	if held, err := holds(t, url, cfg.Queue); !held {
		t.Fatalf("queue %s after the second Publish: holds a message %v (%v); want it declared again, holding the message", cfg.Queue, held, err)
	}
}

// DeadLetter does not return nil for a copy no dead-letter queue holds:
// with the dead-letter queue gone, the copy is returned, DeadLetter fails
// and the original stays in the hand-off's queue.
func TestDeadLetterToAMissingQueueFails(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 10*time.Second)
	pub := publisher(t, url, cfg)
	src := source(t, url, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, id := range []string{"dead-1", "dead-2"} {
		m := handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "sku", Qty: 1}}}, Sent: time.Now()}
		if err := pub.Publish(ctx, m); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	fetchOne := func() handoff.Delivery {
		t.Helper()
		ds, err := src.Fetch(ctx, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch = %d, %v", len(ds), err)
		}
		return ds[0]
	}
	// The first dead letter opens the Source's dead-letter channel.
	if err := fetchOne().DeadLetter(ctx, errCannotSettle); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	deleteQueue(t, url, cfg.DeadQueue)
	d := fetchOne()
	derr := d.DeadLetter(ctx, errCannotSettle)
	held, _ := holds(t, url, cfg.DeadQueue)
	if derr == nil && !held {
		t.Fatalf("DeadLetter of %s returned nil (and acknowledged the original), but no queue holds its copy (dead-letter queue %s deleted); want an error", d.Message().Order.ID, cfg.DeadQueue)
	}
}
