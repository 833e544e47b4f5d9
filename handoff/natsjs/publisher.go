package natsjs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
)

// Publisher publishes hand-offs to a JetStream stream. It implements
// handoff.Publisher and is safe for concurrent use.
type Publisher struct {
	js  jetstream.JetStream
	cfg Config
}

var _ handoff.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher on js, after creating the hand-off's
// stream (or updating it to cfg).
func NewPublisher(ctx context.Context, js jetstream.JetStream, cfg Config) (*Publisher, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ensureStream(ctx, js, cfg); err != nil {
		return nil, err
	}
	return &Publisher{js: js, cfg: cfg}, nil
}

// Publish stores m in the stream and returns nil once the server has
// acknowledged it (PubAck): stored, on every replica. Its Nats-Msg-Id is
// the order ID, so a repeat within the stream's deduplication window
// (Config.Duplicates) is stored once. An error means m may or may not be
// stored; publishing it again is safe.
func (p *Publisher) Publish(ctx context.Context, m handoff.Message) error {
	if err := m.Order.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("natsjs: encode order %s: %w", m.Order.ID, err)
	}
	msg := &nats.Msg{Subject: p.cfg.Subject, Data: data, Header: nats.Header{}}
	_, err = p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.Order.ID), jetstream.WithExpectStream(p.cfg.Stream))
	if err != nil {
		return fmt.Errorf("natsjs: publish order %s: %w", m.Order.ID, err)
	}
	return nil
}
