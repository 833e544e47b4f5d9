package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// The headers a dead-lettered message carries, beside the original's.
const (
	// ReasonHeader is why the message was dead-lettered.
	ReasonHeader = "x-stockguard-reason"
	// AttemptHeader is the delivery on which it was dead-lettered.
	AttemptHeader = "x-stockguard-attempt"
)

// ErrHandedBack is the answer of Ack, Retry and DeadLetter on a delivery
// that the Source already handed back to the queue (it outlived
// Config.Redelivery, or an earlier call ended it): the message is delivered
// again, and that delivery settles it.
var ErrHandedBack = errors.New("rabbitmq: delivery already handed back")

// Source delivers hand-offs from a quorum queue, with manual
// acknowledgements. It implements handoff.Source and is safe for
// concurrent use; several Sources (in one process or many) on the same
// queue share its messages, each delivered to one of them at a time. It
// opens its connection on first use and a new one after a broker restart.
type Source struct {
	tags    atomic.Int64 // consumer tags, one per Fetch
	holding atomic.Int64 // deliveries not acknowledged, handed back or dead-lettered
	link    *link
	dead    *Publisher // dead letters go through a confirming channel of their own
	cfg     Config
}

var _ handoff.Source = (*Source)(nil)

// NewSource returns a Source on the broker at url (an amqp:// or amqps://
// URL), after connecting and declaring the queues. On error it leaves no
// connection open; a Config that cannot be used is refused with an error
// matching stock.ErrInvalid.
func NewSource(ctx context.Context, url string, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Source{
		link: newLink(url, cfg, false),
		dead: &Publisher{link: newLink(url, cfg, true), cfg: cfg},
		cfg:  cfg,
	}
	if _, err := s.link.channel(ctx); err != nil {
		_ = s.Close() // the connection, if one opened before the failure
		return nil, err
	}
	return s, nil
}

// Fetch returns at most max deliveries, waiting until at least one is
// there or ctx ends (then it returns none and no error). It consumes from
// the queue only while it runs: basic.consume with a prefetch of max,
// until the first message and what else comes within a few milliseconds
// (gather), then basic.cancel, keeping what the broker sent before the
// cancel took effect; so a Source never holds messages it was not asked
// for. A message whose payload does not decode as a hand-off is returned
// like any other, with the zero Message (an invalid, empty Order): the
// handoff.Consumer dead-letters it and reports it (handoff.ErrDeadLettered
// to ConsumerConfig.Done, the Observer). An error of the connection or
// channel is returned, and the next Fetch opens new ones. A max under 1
// is refused with an error matching stock.ErrInvalid.
func (s *Source) Fetch(ctx context.Context, max int) ([]handoff.Delivery, error) {
	if max < 1 {
		return nil, &stock.InvalidError{Field: "rabbitmq.Source.Fetch", Reason: fmt.Sprintf("max is %d, under 1", max)}
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	ch, err := s.link.channel(ctx)
	if err != nil {
		return s.failed(ctx, err)
	}
	if err := ch.Qos(max, 0, false); err != nil {
		s.link.broken(ch)
		return s.failed(ctx, err)
	}
	tag := fmt.Sprintf("stockguard-%d", s.tags.Add(1))
	in, err := ch.Consume(s.cfg.Queue, tag, false, false, false, false, nil)
	if err != nil {
		s.link.broken(ch)
		return s.failed(ctx, err)
	}
	var ds []handoff.Delivery
	add := func(msg amqp.Delivery) { ds = append(ds, s.delivery(ch, msg)) }
	select {
	case msg, ok := <-in:
		if ok {
			add(msg)
		}
	case <-ctx.Done():
	}
	if len(ds) > 0 {
		t := time.NewTimer(gather)
	more:
		for len(ds) < max {
			select {
			case msg, ok := <-in:
				if !ok {
					break more
				}
				add(msg)
			case <-t.C:
				break more
			}
		}
		t.Stop()
	}
	cerr := ch.Cancel(tag, false)
	if cerr != nil {
		s.link.broken(ch) // closing the channel closes in
	}
	for msg := range in { // what the broker sent before the cancel
		add(msg)
	}
	if len(ds) == 0 && cerr != nil {
		return s.failed(ctx, cerr)
	}
	return ds, nil
}

// gather is how long Fetch waits for more messages after the first.
const gather = 5 * time.Millisecond

// failed is Fetch's answer to err: none and no error once ctx ended.
func (s *Source) failed(ctx context.Context, err error) ([]handoff.Delivery, error) {
	if ctx.Err() != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("rabbitmq: consume from %s: %w", s.cfg.Queue, err)
}

// Holding is the number of messages the Source holds: delivered by a
// Fetch and not acknowledged, dead-lettered or handed back yet (a Retry's
// message until its delay passes included). With the queue's ready count
// (Publisher.Ready) it is what the hand-off has not finished.
func (s *Source) Holding() int64 { return s.holding.Load() }

// Close closes the Source's connections: the broker hands back every
// message delivered and not acknowledged. Fetch fails after it.
func (s *Source) Close() error {
	return errors.Join(s.link.close(), s.dead.Close())
}

// delivery decodes msg and starts its Redelivery timer. A payload that
// does not decode yields the zero Message, whose Order is invalid: the
// Consumer dead-letters it.
func (s *Source) delivery(ch *amqp.Channel, msg amqp.Delivery) *delivery {
	d := &delivery{src: s, ch: ch, msg: msg, attempt: 1 + deliveryCount(msg.Headers)}
	s.holding.Add(1)
	// Set under the lock: the timer's own end() may run before
	// AfterFunc returns.
	d.mu.Lock()
	d.timer = time.AfterFunc(s.cfg.Redelivery, func() { d.handBack(0) })
	d.mu.Unlock()
	if json.Unmarshal(msg.Body, &d.m) != nil {
		d.m = handoff.Message{}
	}
	return d
}

// deliveryCount is the quorum queue's count of earlier deliveries of a
// message (its x-delivery-count header; absent on the first).
func deliveryCount(h amqp.Table) int {
	switch n := h["x-delivery-count"].(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int16:
		return int(n)
	case int8:
		return int(n)
	case uint8:
		return int(n)
	case uint16:
		return int(n)
	case uint32:
		return int(n)
	case int:
		return n
	}
	return 0
}

// delivery is one delivery of a message to a Fetch. It ends once: by
// Ack, Retry, DeadLetter or the Redelivery timer, whichever comes first.
type delivery struct {
	src     *Source
	ch      *amqp.Channel // the channel it came on: its tag means nothing on another
	msg     amqp.Delivery
	m       handoff.Message
	attempt int

	mu    sync.Mutex
	ended bool
	timer *time.Timer
}

// Message is the delivered hand-off.
func (d *delivery) Message() handoff.Message { return d.m }

// Attempt is 1 plus the quorum queue's count of earlier deliveries.
func (d *delivery) Attempt() int { return d.attempt }

// end ends the delivery; false if it had ended already.
func (d *delivery) end() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended {
		return false
	}
	d.ended = true
	d.timer.Stop()
	return true
}

// handBack ends the delivery by handing the message back to the queue
// after delay: basic.reject with requeue, which the quorum queue counts as
// a failed delivery (from RabbitMQ 4.3, basic.nack no longer does). It
// does nothing if the delivery had ended.
func (d *delivery) handBack(delay time.Duration) {
	if !d.end() {
		return
	}
	reject := func() {
		// On a closed channel the broker has handed the message back
		// already.
		_ = d.ch.Reject(d.msg.DeliveryTag, true)
		d.src.holding.Add(-1)
	}
	if delay <= 0 {
		reject()
		return
	}
	time.AfterFunc(delay, reject)
}

// Ack acknowledges the message. AMQP 0-9-1 does not confirm an ack: nil
// means it was sent on the channel the message came on; should the
// connection end before the broker reads it, the message is delivered
// again (and settled again, which changes nothing). An error means it is
// delivered again: ErrHandedBack once Config.Redelivery passed.
func (d *delivery) Ack(context.Context) error {
	if !d.end() {
		return ErrHandedBack
	}
	defer d.src.holding.Add(-1)
	if err := d.ch.Ack(d.msg.DeliveryTag, false); err != nil {
		return fmt.Errorf("rabbitmq: ack: %w", err)
	}
	return nil
}

// Retry hands the message back to the queue after delay: the Source holds
// it meanwhile and then rejects it with requeue, and the queue delivers it
// again with its delivery count one more. A message handed back by a
// connection that ended is delivered again too; whether the queue counts
// that delivery depends on the RabbitMQ version (3.x does). Should the Source's connection
// end first, the broker hands it back then.
func (d *delivery) Retry(_ context.Context, delay time.Duration) error {
	d.mu.Lock()
	ended := d.ended
	d.mu.Unlock()
	if ended {
		return ErrHandedBack
	}
	d.handBack(delay)
	return nil
}

// DeadLetter publishes the message, with reason and its attempt in
// headers, to the dead-letter queue, and once the broker has confirmed
// that, acknowledges the original. The copy is published mandatory: if no
// queue takes it (the dead-letter queue is gone) the error matches
// ErrReturned. If the copy cannot be published the message is handed back
// (and dead-lettered again on a later delivery).
func (d *delivery) DeadLetter(ctx context.Context, reason error) error {
	if !d.end() {
		return ErrHandedBack
	}
	defer d.src.holding.Add(-1)
	if reason == nil {
		reason = errors.New("rabbitmq: dead-lettered without a reason")
	}
	h := amqp.Table{}
	for k, v := range d.msg.Headers {
		h[k] = v
	}
	h[ReasonHeader] = reason.Error()
	h[AttemptHeader] = int64(d.attempt)
	msg := amqp.Publishing{
		Headers:      h,
		ContentType:  d.msg.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    d.msg.MessageId,
		Timestamp:    d.msg.Timestamp,
		Body:         d.msg.Body,
	}
	if err := d.src.dead.publish(ctx, d.src.cfg.DeadQueue, msg); err != nil {
		_ = d.ch.Reject(d.msg.DeliveryTag, true)
		return fmt.Errorf("rabbitmq: dead-letter: %w", err)
	}
	if err := d.ch.Ack(d.msg.DeliveryTag, false); err != nil {
		return fmt.Errorf("rabbitmq: ack after dead-lettering: %w", err)
	}
	return nil
}
