package rabbitmq_test

import (
	"math"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/internal/testdb"
)

// The Consumer, not the broker, decides when a message is dead: it
// retries an order through a record outage for as long as the order's
// Deadline has not passed, a delivery each time. RabbitMQ 4 gives a
// quorum queue declared without an x-delivery-limit a limit of 20
// deliveries, after which the broker dead-letters the message behind the
// Consumer's back; so both queues carry a limit no message reaches. (-1,
// RabbitMQ 4's "no limit", would dead-letter at the first requeue on
// RabbitMQ 3.) RabbitMQ refuses a declaration whose arguments differ
// from the queue's: a declaration with that limit passes only if the
// queues have it.
func TestQueuesHaveNoReachableDeliveryLimit(t *testing.T) {
	url := testdb.Need(t, broker)
	cfg := config(t, url, 500*time.Millisecond)
	publisher(t, url, cfg)
	limit := int64(math.MaxInt32)
	if _, err := adminChannel(t, url).QueueDeclare(cfg.DeadQueue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": limit,
	}); err != nil {
		t.Errorf("the dead-letter queue is not declared with x-delivery-limit %d: %v", limit, err)
	}
	if _, err := adminChannel(t, url).QueueDeclare(cfg.Queue, true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-delivery-limit": limit,
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": cfg.DeadQueue,
	}); err != nil {
		t.Errorf("the queue is not declared with x-delivery-limit %d: %v", limit, err)
	}

	// And a message requeued more than RabbitMQ 4's default limit is
	// still delivered.
	ch := adminChannel(t, url)
	if err := ch.PublishWithContext(ctxT(t), "", cfg.Queue, false, false, amqp.Publishing{Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		var msg amqp.Delivery
		var ok bool
		for wait := time.Now().Add(5 * time.Second); !ok && time.Now().Before(wait); {
			var err error
			if msg, ok, err = ch.Get(cfg.Queue, false); err != nil {
				t.Fatal(err)
			}
			if !ok {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if !ok {
			t.Fatalf("the message is gone after %d deliveries", i)
		}
		if err := msg.Reject(true); err != nil {
			t.Fatal(err)
		}
	}
}
