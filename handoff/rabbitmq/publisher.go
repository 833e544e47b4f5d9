package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
)

// errClosed is the answer of a Publisher or Source after Close.
var errClosed = errors.New("rabbitmq: closed")

// ErrReturned is returned by Publish (and DeadLetter) when the broker
// returned the message: no queue took it, because its queue is gone
// (deleted by an operator or a policy after the Publisher declared it).
// Nothing was queued; the next Publish declares the queue again on a new
// channel.
var ErrReturned = errors.New("rabbitmq: no queue took the message")

// ErrNacked is returned by Publish when the broker refused the message
// (a negative publisher confirm: a resource alarm, a queue at its length
// limit). Nothing was queued; publish again later.
var ErrNacked = errors.New("rabbitmq: the broker refused the message")

// Publisher publishes hand-offs to a quorum queue with publisher confirms.
// It implements handoff.Publisher and is safe for concurrent use. It is
// not a handoff.OldestReader (see the package doc): a Recorder over it
// reads RecorderConfig.Lag. It opens
// its connection on first use and a new one after a broker restart.
type Publisher struct {
	link *link
	cfg  Config
}

var _ handoff.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher to the broker at url (an amqp:// or
// amqps:// URL), after connecting and declaring the queues. On error it
// leaves no connection open; a Config that cannot be used is refused with
// an error matching stock.ErrInvalid.
func NewPublisher(ctx context.Context, url string, cfg Config) (*Publisher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Publisher{link: newLink(url, cfg, true), cfg: cfg}
	if _, err := p.link.channel(ctx); err != nil {
		_ = p.Close() // the connection, if one opened before the failure
		return nil, err
	}
	return p, nil
}

// Publish queues m as a persistent message whose message-id is the order
// ID, and returns nil once the broker has confirmed it (stored on the
// quorum queue's majority). It publishes mandatory: a message no queue
// takes (the queue is gone) is returned by the broker, and Publish
// returns ErrReturned, after which the next Publish declares the queue
// again. On a connection or channel that closed (a
// broker restart) it reconnects and publishes again, until ctx ends or
// Config.PublishTimeout passes. An error means m may or may not be queued;
// publishing it again is safe (RabbitMQ does not deduplicate: the consumer
// settles the order once whatever the count). A refusal by the broker is
// ErrNacked.
func (p *Publisher) Publish(ctx context.Context, m handoff.Message) error {
	if err := m.Order.Validate(); err != nil {
		return err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("rabbitmq: encode order %s: %w", m.Order.ID, err)
	}
	msg := amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    m.Order.ID,
		Timestamp:    m.Sent,
		Body:         body,
	}
	if err := p.publish(ctx, p.cfg.Queue, msg); err != nil {
		return fmt.Errorf("rabbitmq: publish order %s: %w", m.Order.ID, err)
	}
	return nil
}

// publish sends msg to queue through the default exchange and waits for its
// confirm, on a new channel after one that closed.
func (p *Publisher) publish(ctx context.Context, queue string, msg amqp.Publishing) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.PublishTimeout)
		defer cancel()
	}
	for {
		err := p.publishOnce(ctx, queue, msg)
		if err == nil || errors.Is(err, ErrNacked) || errors.Is(err, ErrReturned) || errors.Is(err, errClosed) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		if pause(ctx, 50*time.Millisecond) != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}

// publishOnce is one attempt of publish: mandatory, so that a message no
// queue takes is returned (before its confirm) and fails.
func (p *Publisher) publishOnce(ctx context.Context, queue string, msg amqp.Publishing) error {
	ch, ret, err := p.link.publishing(ctx)
	if err != nil {
		return err
	}
	id := ret.id()
	h := amqp.Table{}
	for k, v := range msg.Headers {
		h[k] = v
	}
	h[PublishHeader] = id
	msg.Headers = h
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
	if err != nil {
		ret.take(id)
		p.link.broken(ch)
		return err
	}
	ok, err := dc.WaitContext(ctx)
	returned := ret.take(id)
	switch {
	case err != nil:
		return err
	case returned:
		// The queue is gone: the next channel declares it again.
		p.link.broken(ch)
		return ErrReturned
	case ok:
		return nil
	case ch.IsClosed():
		// The channel closed before the confirm: the broker may have
		// the message or not.
		p.link.broken(ch)
		return amqp.ErrClosed
	}
	return ErrNacked
}

// Ready returns the number of messages in the queue ready for delivery:
// not those delivered and not acknowledged yet (see Source.Holding).
func (p *Publisher) Ready(ctx context.Context) (int64, error) {
	ch, err := p.link.channel(ctx)
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(p.cfg.Queue, true, false, false, false, nil)
	if err != nil {
		p.link.broken(ch)
		return 0, fmt.Errorf("rabbitmq: inspect %s: %w", p.cfg.Queue, err)
	}
	return int64(q.Messages), nil
}

// Close closes the Publisher's connection. Publish fails after it.
func (p *Publisher) Close() error { return p.link.close() }

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
