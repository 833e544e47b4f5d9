package handoff

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Message is one order on its way from the gate to the record.
type Message struct {
	// Order is the order the gate holds, as it was placed. Its ID is the
	// message's deduplication ID at brokers that have one.
	Order stock.Order
	// Deadline is when the gate hold ends, as it stood when the message
	// was published: the Consumer retries an infrastructure failure until
	// then, and past it while the gate says it still holds the order (a
	// hold extended since, or cannot tell: see HoldReader). A Recorder
	// always sets it (it publishes nothing for an order whose hold time it
	// cannot read). A message delivered after it is still settled (Settle
	// returns a hold that ended through its refusal path and reverts any
	// copy at the record); it is counted as expired in the queue when
	// Settle answers stock.ErrHoldExpired.
	Deadline time.Time
	// Sent is when the message was published: the start of its lag.
	Sent time.Time
}

// Publisher sends messages to a broker. An adapter for a broker
// implements it; Recorder turns it into the tiered flow's Recorder. It is
// safe for concurrent use.
type Publisher interface {
	// Publish returns nil once the broker has m durably. An error means it
	// may not have: the tiered flow leaves the gate hold for a retry of
	// the Deduct (the same order ID publishes the same message, which a
	// broker with deduplication drops and the consumer settles once
	// either way) or for the gate's reclaimer.
	Publish(ctx context.Context, m Message) error
}

// Delivery is one delivery of a message to a consumer. Its methods may be
// called from any goroutine, concurrently with those of other deliveries
// and with the Source's Fetch; the first of Ack, Retry and DeadLetter to
// return nil ends the delivery.
type Delivery interface {
	// Message is the delivered message.
	Message() Message
	// Attempt is 1 on the message's first delivery, 2 on its second, ...
	Attempt() int
	// Ack removes the message from the queue: its order is settled.
	Ack(ctx context.Context) error
	// Retry hands the message back to be delivered again, no sooner than
	// after delay.
	Retry(ctx context.Context, delay time.Duration) error
	// DeadLetter moves the message, with the reason, to the broker's
	// dead-letter destination and removes it from the queue.
	DeadLetter(ctx context.Context, reason error) error
}

// Source delivers messages to a consumer. An adapter for a broker
// implements it; Consumer settles what it delivers. Each Source is one
// consumer of its queue: several Sources of one queue (on one node or
// many) share its messages, each delivered to one of them at a time.
// Fetch is called by one goroutine at a time.
type Source interface {
	// Fetch returns at most max deliveries, waiting until at least one is
	// there or ctx ends (then it returns what it has, possibly none, and
	// no error). A message not acknowledged, retried or dead-lettered is
	// delivered again after the adapter's own timeout. Deliveries returned
	// together with an error are in the consumer's hands all the same:
	// Consumer.Run settles them.
	Fetch(ctx context.Context, max int) ([]Delivery, error)
}

// OldestReader is what a broker adapter's Publisher may also implement:
// it tells the hand-off's lag as the broker sees it, counting the
// consumers of every node. A Recorder over a Publisher that is an
// OldestReader reads its lag from Oldest (at most once per
// RecorderConfig.LagCache), and falls back to RecorderConfig.Lag (the
// in-process consumers' measure) while Oldest fails.
type OldestReader interface {
	// Oldest returns the Sent time of the oldest message the queue holds
	// that is not acknowledged or dead-lettered yet, waiting for a
	// consumer or in one's hands (one waiting out a Retry's delay may be
	// left out), and false when the queue holds none. It is one cheap
	// call to the broker (e.g. the first entry of a stream).
	Oldest(ctx context.Context) (sent time.Time, ok bool, err error)
}
