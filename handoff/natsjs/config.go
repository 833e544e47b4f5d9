package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/stock"
)

// Config names the streams and the consumer of a hand-off and sets how
// they behave. The zero value means the defaults each field gives.
// Publishers and sources of one hand-off must use the same Config: each
// creates (or updates to it) what it uses.
type Config struct {
	// Stream is the stream that holds the messages on their way; default
	// "STOCKGUARD_HANDOFF". It is a work queue: a message leaves it when
	// the consumer acknowledges it.
	Stream string
	// Subject is the subject messages are published on, the stream's only
	// subject; default "stockguard.handoff".
	Subject string
	// Consumer is the durable pull consumer's name; default
	// "stockguard-record". Every Source of the hand-off (one per process
	// or many) reads through it, so each message goes to one of them.
	Consumer string
	// DeadStream is the stream that keeps dead-lettered messages, with
	// the reason in the Stockguard-Reason header; default Stream+"_DEAD".
	// JetStream has no dead-letter queue of its own: a consumer's
	// MaxDeliver only stops delivering a message, which would leave it in
	// the stream unseen, so the consumer's MaxDeliver is unlimited and the
	// Consumer that reads the Source decides when a message is dead.
	DeadStream string
	// DeadSubject is the subject of DeadStream; default Subject+".dead".
	DeadSubject string
	// AckWait is how long a delivered message may stay unacknowledged
	// before the server delivers it again (a consumer that stopped between
	// Settle and its Ack); default 30s. It must exceed the time a batch
	// takes to settle.
	AckWait time.Duration
	// Duplicates is the stream's deduplication window: a message published
	// again with the same order ID within it is stored once; default 2m.
	// A repeat after it is delivered again and settled again, which
	// changes nothing (Settle is idempotent).
	Duplicates time.Duration
	// Replicas is the number of replicas of both streams; default 1.
	Replicas int
	// Storage is the streams' storage; the zero value is file storage,
	// which survives a server restart.
	Storage jetstream.StorageType
	// MaxAckPending bounds the messages delivered and not acknowledged yet,
	// across all sources; default 1024.
	MaxAckPending int
	// PollWait bounds one wait of Fetch at the server: Fetch asks again
	// after it until a message comes or its context ends; default 1s. A
	// message the server delivers to a wait whose Fetch has returned (its
	// context ended meanwhile) is delivered again after AckWait.
	PollWait time.Duration
}

// withDefaults returns c with every zero field set to its default, or an
// error naming a field that cannot be used (a *stock.InvalidError,
// matching stock.ErrInvalid).
func (c Config) withDefaults() (Config, error) {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&c.Stream, "STOCKGUARD_HANDOFF")
	def(&c.Subject, "stockguard.handoff")
	def(&c.Consumer, "stockguard-record")
	def(&c.DeadStream, c.Stream+"_DEAD")
	def(&c.DeadSubject, c.Subject+".dead")
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Duplicates == 0 {
		c.Duplicates = 2 * time.Minute
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1024
	}
	if c.PollWait == 0 {
		c.PollWait = time.Second
	}
	switch {
	case c.AckWait < 0, c.Duplicates < 0, c.Replicas < 0, c.MaxAckPending < 0, c.PollWait < 0:
		return c, &stock.InvalidError{Field: "natsjs.Config", Reason: "negative AckWait, Duplicates, Replicas, MaxAckPending or PollWait"}
	case c.Stream == c.DeadStream:
		return c, &stock.InvalidError{Field: "natsjs.Config.DeadStream", Reason: fmt.Sprintf("Stream and DeadStream are both %q", c.Stream)}
	case c.Subject == c.DeadSubject:
		return c, &stock.InvalidError{Field: "natsjs.Config.DeadSubject", Reason: fmt.Sprintf("Subject and DeadSubject are both %q", c.Subject)}
	case c.PollWait < 10*time.Millisecond:
		return c, &stock.InvalidError{Field: "natsjs.Config.PollWait", Reason: fmt.Sprintf("%v is under 10ms", c.PollWait)}
	}
	return c, nil
}

// ensureStream creates the hand-off's stream, or updates it to c.
func ensureStream(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "stockguard: orders on their way from the gate to the record",
		Subjects:    []string{c.Subject},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		Duplicates:  c.Duplicates,
	})
	if err != nil {
		return nil, fmt.Errorf("natsjs: stream %s: %w", c.Stream, err)
	}
	return stream, nil
}

// ensureDead creates the dead-letter stream, or updates it to c. Its
// messages stay until an operator removes them.
func ensureDead(ctx context.Context, js jetstream.JetStream, c Config) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        c.DeadStream,
		Description: "stockguard: hand-offs that could never settle, with the reason",
		Subjects:    []string{c.DeadSubject},
		Retention:   jetstream.LimitsPolicy,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		Duplicates:  c.Duplicates,
	})
	if err != nil {
		return fmt.Errorf("natsjs: dead-letter stream %s: %w", c.DeadStream, err)
	}
	return nil
}

// ensureConsumer creates the durable pull consumer, or updates it to c.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, c.Stream, jetstream.ConsumerConfig{
		Durable:       c.Consumer,
		Description:   "stockguard: settles hand-offs at the record",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: c.MaxAckPending,
		FilterSubject: c.Subject,
	})
	if err != nil {
		return nil, fmt.Errorf("natsjs: consumer %s on %s: %w", c.Consumer, c.Stream, err)
	}
	return cons, nil
}

// lost tells whether err says the server has not the hand-off's stream or
// consumer: not found, or no answer from the stream (a publish to a
// subject no stream listens on), as after a server came back with an
// empty store. The Publisher and the Source then create them again and
// try once more.
func lost(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrNoResponders)
}
