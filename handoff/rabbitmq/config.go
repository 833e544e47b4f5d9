package rabbitmq

import (
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/stock"
)

// Config names the queues of a hand-off and sets how they behave. The zero
// value means the defaults each field gives. Publishers and sources of one
// hand-off must use the same Config: each declares the queues it uses, and
// RabbitMQ refuses a declaration that differs from the queue's.
type Config struct {
	// Queue is the durable quorum queue that holds the messages on their
	// way; default "stockguard.handoff".
	Queue string
	// DeadQueue is the durable quorum queue that keeps dead-lettered
	// messages, with the reason in the x-stockguard-reason header; default
	// Queue+".dead". It is also Queue's dead-letter destination, so a
	// message the broker itself gives up on (a delivery limit set by
	// policy: both queues are declared with x-delivery-limit 2147483647,
	// so RabbitMQ 4's default of 20 does not apply) lands there too,
	// with the broker's x-death header.
	DeadQueue string
	// Redelivery is how long a delivery may stay neither acknowledged,
	// retried nor dead-lettered before the Source hands it back to the
	// queue for another delivery; default 30s. A Source whose connection
	// ends hands back everything at once (the broker does).
	Redelivery time.Duration
	// PublishTimeout bounds a Publish whose context has no deadline, retries
	// on a new connection included; default 5s.
	PublishTimeout time.Duration
	// Connection configures the connections (TLS, heartbeat, properties);
	// the zero value is amqp091's defaults with a 10s dial timeout and a
	// 10s handshake timeout. One attempt at a time opens a connection,
	// and every call that needs it waits for that attempt only until its
	// own context ends; Close ends the attempt (a Dial given here cannot
	// be interrupted, but the handshake that follows it can).
	Connection amqp.Config
}

// withDefaults returns c with every zero field set to its default, or an
// error naming a field that cannot be used (a *stock.InvalidError,
// matching stock.ErrInvalid).
func (c Config) withDefaults() (Config, error) {
	if c.Queue == "" {
		c.Queue = "stockguard.handoff"
	}
	if c.DeadQueue == "" {
		c.DeadQueue = c.Queue + ".dead"
	}
	if c.Redelivery == 0 {
		c.Redelivery = 30 * time.Second
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 5 * time.Second
	}
	switch {
	case c.Redelivery < 0, c.PublishTimeout < 0:
		return c, &stock.InvalidError{Field: "rabbitmq.Config", Reason: "negative Redelivery or PublishTimeout"}
	case c.Queue == c.DeadQueue:
		return c, &stock.InvalidError{Field: "rabbitmq.Config.DeadQueue", Reason: fmt.Sprintf("Queue and DeadQueue are both %q", c.Queue)}
	}
	return c, nil
}

// deliveryLimit is the x-delivery-limit both queues are declared with: so
// high that no message reaches it, for the Consumer, not the broker,
// decides when a message is dead. RabbitMQ 4 gives a quorum queue
// declared without one a limit of 20 deliveries, which the Consumer's
// retries through a record outage of a minute or two exceed; and -1,
// RabbitMQ 4's "no limit", is not one on RabbitMQ 3, which then
// dead-letters a message at its first requeue. A delivery-limit set by
// an operator's policy still applies (the lower of the two).
const deliveryLimit = math.MaxInt32

// declare declares both queues on ch: durable quorum queues with no
// delivery limit a message could reach (deliveryLimit), Queue
// dead-lettering to DeadQueue.
func (c Config) declare(ch *amqp.Channel) error {
	if _, err := ch.QueueDeclare(c.DeadQueue, true, false, false, false, amqp.Table{
		"x-queue-type":     "quorum",
		"x-delivery-limit": int64(deliveryLimit),
	}); err != nil {
		return fmt.Errorf("rabbitmq: declare %s: %w", c.DeadQueue, err)
	}
	if _, err := ch.QueueDeclare(c.Queue, true, false, false, false, amqp.Table{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int64(deliveryLimit),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": c.DeadQueue,
	}); err != nil {
		return fmt.Errorf("rabbitmq: declare %s: %w", c.Queue, err)
	}
	return nil
}
