package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// Publisher publishes hand-offs to a JetStream stream. It implements
// handoff.Publisher and handoff.OldestReader, and is safe for concurrent
// use.
type Publisher struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    Config
}

var (
	_ handoff.Publisher    = (*Publisher)(nil)
	_ handoff.OldestReader = (*Publisher)(nil)
)

// NewPublisher returns a Publisher on js, after creating the hand-off's
// stream (or updating it to cfg). A nil js or a Config that cannot be
// used is refused with an error matching stock.ErrInvalid.
func NewPublisher(ctx context.Context, js jetstream.JetStream, cfg Config) (*Publisher, error) {
	if js == nil {
		return nil, &stock.InvalidError{Field: "natsjs.NewPublisher", Reason: "needs a JetStream client"}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	stream, err := ensureStream(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js, stream: stream, cfg: cfg}, nil
}

// Publish stores m in the stream and returns nil once the server has
// acknowledged it (PubAck): stored, on every replica. Its Nats-Msg-Id is
// the order ID, so a repeat within the stream's deduplication window
// (Config.Duplicates) is stored once. When the stream is not found or
// does not answer (a server that came back with an empty store), Publish
// creates the stream and publishes once more, with the same Nats-Msg-Id.
// An error means m may or may not be stored; publishing it again is safe.
func (p *Publisher) Publish(ctx context.Context, m handoff.Message) error {
	if err := m.Order.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("natsjs: encode order %s: %w", m.Order.ID, err)
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.Order.ID), jetstream.WithExpectStream(p.cfg.Stream)}
	publish := func() error {
		_, err := p.js.PublishMsg(ctx, &nats.Msg{Subject: p.cfg.Subject, Data: data, Header: nats.Header{}}, opts...)
		return err
	}
	err = publish()
	if lost(err) && ctx.Err() == nil {
		if _, serr := ensureStream(ctx, p.js, p.cfg); serr != nil {
			return fmt.Errorf("natsjs: publish order %s: %w", m.Order.ID, errors.Join(err, serr))
		}
		err = publish()
	}
	if err != nil {
		return fmt.Errorf("natsjs: publish order %s: %w", m.Order.ID, err)
	}
	return nil
}

// Oldest returns the Sent time of the first message in the stream
// (handoff.OldestReader): the stream is a work queue, so that is the
// oldest message not acknowledged or dead-lettered, whether it waits for
// a consumer, is in one's hands or waits out a Retry's delay (a
// negative acknowledgement leaves it in the stream). It is one request
// to the server, a get of the first message on the stream's subject. A
// payload that does not decode (or has no Sent) is dated by the time the
// stream stored it. It returns false when the stream is empty.
func (p *Publisher) Oldest(ctx context.Context) (time.Time, bool, error) {
	msg, err := p.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(p.cfg.Subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("natsjs: oldest message of %s: %w", p.cfg.Stream, err)
	}
	var m handoff.Message
	if json.Unmarshal(msg.Data, &m) == nil && !m.Sent.IsZero() {
		return m.Sent, true, nil
	}
	return msg.Time, true, nil
}
