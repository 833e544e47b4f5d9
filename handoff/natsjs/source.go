package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
)

// The headers a dead-lettered message carries, beside the original's.
const (
	// ReasonHeader is why the message was dead-lettered.
	ReasonHeader = "Stockguard-Reason"
	// AttemptHeader is the delivery on which it was dead-lettered.
	AttemptHeader = "Stockguard-Attempt"
	// SequenceHeader is its sequence in the hand-off's stream.
	SequenceHeader = "Stockguard-Stream-Seq"
)

// Source delivers hand-offs from a durable pull consumer. It implements
// handoff.Source and is safe for concurrent use; several Sources (in one
// process or many) on the same Config share the consumer, and each message
// goes to one of them at a time.
type Source struct {
	js  jetstream.JetStream
	cfg Config
	// cons is the consumer, replaced when Fetch creates it again; each
	// fetch loads it once.
	cons atomic.Pointer[jetstream.Consumer]
	// renew holds a value while the streams and the consumer are created
	// again, so that the Fetch calls that found them lost do it once, in
	// turn, each waiting for its turn only as long as its context.
	renew chan struct{}
	// idle is set while the consumer's pulls deliver nothing, and checked
	// the time (UnixNano) the consumer was last found on the server: a
	// server may answer nothing at all to a pull on a consumer it has not
	// (nats-server 2.9), so an idle Source asks for the consumer's info at
	// most once a PollWait.
	idle    atomic.Bool
	checked atomic.Int64
}

var _ handoff.Source = (*Source)(nil)

// NewSource returns a Source on js, after creating the hand-off's stream,
// its dead-letter stream and the durable consumer (or updating them to
// cfg). A nil js or a Config that cannot be used is refused with an error
// matching stock.ErrInvalid.
func NewSource(ctx context.Context, js jetstream.JetStream, cfg Config) (*Source, error) {
	if js == nil {
		return nil, &stock.InvalidError{Field: "natsjs.NewSource", Reason: "needs a JetStream client"}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if _, err := ensureStream(ctx, js, cfg); err != nil {
		return nil, err
	}
	if err := ensureDead(ctx, js, cfg); err != nil {
		return nil, err
	}
	cons, err := ensureConsumer(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	s := &Source{js: js, cfg: cfg, renew: make(chan struct{}, 1)}
	s.cons.Store(&cons)
	s.checked.Store(time.Now().UnixNano())
	return s, nil
}

// Fetch returns at most max deliveries, waiting until at least one is
// there or ctx ends (then it returns none and no error). It takes what the
// consumer has at once, and only when it has nothing waits for one
// message (Config.PollWait at a time) and then takes what else came. A
// message whose payload does not decode as a hand-off is returned like
// any other, with the zero Message (an invalid, empty Order): the
// handoff.Consumer dead-letters it and reports it (handoff.ErrDeadLettered
// to ConsumerConfig.Done, the Observer). When the server has not the
// stream or the consumer (it came back with an empty store, or the
// consumer was deleted), Fetch creates them again, as NewSource does, and
// fetches once more. A server may answer nothing to a pull on a consumer
// it has not, so while the Source's pulls deliver nothing Fetch also asks
// whether the consumer is there, at most once a PollWait for the Source
// (a pull that delivers costs nothing more). A max under 1 is refused
// with an error matching stock.ErrInvalid.
func (s *Source) Fetch(ctx context.Context, max int) ([]handoff.Delivery, error) {
	if max < 1 {
		return nil, &stock.InvalidError{Field: "natsjs.Source.Fetch", Reason: fmt.Sprintf("max is %d, under 1", max)}
	}
	old := s.cons.Load()
	ds, err := s.fetch(ctx, *old, max)
	if lost(err) && ctx.Err() == nil {
		cons, cerr := s.ensure(ctx, old)
		if cerr != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, errors.Join(err, cerr)
		}
		ds, err = s.fetch(ctx, cons, max)
	}
	return ds, err
}

// ensure creates the streams and the consumer of the Source again, when
// absent, as NewSource does, and makes the consumer the Source's. A Fetch
// that found old lost and comes after another one replaced it takes the
// replacement. One that waits for its turn longer than ctx returns
// ctx's error.
func (s *Source) ensure(ctx context.Context, old *jetstream.Consumer) (jetstream.Consumer, error) {
	select {
	case s.renew <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.renew }()
	if cur := s.cons.Load(); cur != old {
		return *cur, nil
	}
	if _, err := ensureStream(ctx, s.js, s.cfg); err != nil {
		return nil, err
	}
	if err := ensureDead(ctx, s.js, s.cfg); err != nil {
		return nil, err
	}
	cons, err := ensureConsumer(ctx, s.js, s.cfg)
	if err != nil {
		return nil, err
	}
	s.cons.Store(&cons)
	return cons, nil
}

// fetch is Fetch from cons, the Source's consumer as it is.
func (s *Source) fetch(ctx context.Context, cons jetstream.Consumer, max int) ([]handoff.Delivery, error) {
	for {
		if ctx.Err() != nil {
			return nil, nil
		}
		if err := s.check(ctx, cons); err != nil {
			return s.failed(ctx, err)
		}
		batch, err := cons.FetchNoWait(max)
		if err != nil {
			return s.failed(ctx, err)
		}
		ds, err := s.take(batch)
		if len(ds) > 0 || err != nil {
			s.idle.Store(len(ds) == 0)
			return ds, err
		}
		s.idle.Store(true)
		wait := s.cfg.PollWait
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < wait {
				wait = left
			}
		}
		if wait < 10*time.Millisecond {
			return nil, nil // no time left to wait at the server
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		batch, err = cons.Fetch(1, jetstream.FetchContext(wctx))
		if err != nil {
			cancel()
			return s.failed(ctx, err)
		}
		// Read to the batch's end: its one message, or the wait's end.
		ds, err = s.take(batch)
		cancel()
		if err != nil {
			return s.failed(ctx, err)
		}
		if len(ds) == 0 {
			continue
		}
		s.idle.Store(false)
		if max > 1 {
			if more, err := cons.FetchNoWait(max - 1); err == nil {
				rest, _ := s.take(more)
				ds = append(ds, rest...)
			}
		}
		return ds, nil
	}
}

// check asks the server for cons's info when the Source's pulls have
// delivered nothing and PollWait has passed since the consumer was last
// found (one Fetch of the Source asks at a time), and answers the error
// that says the stream or the consumer is not found; nil otherwise (any
// other error is the next pull's to meet).
func (s *Source) check(ctx context.Context, cons jetstream.Consumer) error {
	if !s.idle.Load() {
		return nil
	}
	last, now := s.checked.Load(), time.Now()
	if now.Sub(time.Unix(0, last)) < s.cfg.PollWait || !s.checked.CompareAndSwap(last, now.UnixNano()) {
		return nil
	}
	if _, err := cons.Info(ctx); lost(err) {
		return err
	}
	return nil
}

// failed is Fetch's answer to err: none and no error once ctx ended.
func (s *Source) failed(ctx context.Context, err error) ([]handoff.Delivery, error) {
	if ctx.Err() != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("natsjs: fetch from %s: %w", s.cfg.Consumer, err)
}

// take reads a batch to its end.
func (s *Source) take(batch jetstream.MessageBatch) ([]handoff.Delivery, error) {
	var ds []handoff.Delivery
	for msg := range batch.Messages() {
		ds = append(ds, s.delivery(msg))
	}
	err := batch.Error()
	if len(ds) > 0 || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// What came is the answer: the wait ended, or an error after
		// some messages, which the next Fetch meets again.
		err = nil
	}
	return ds, err
}

// delivery decodes msg. A payload that does not decode yields the zero
// Message, whose Order is invalid: the Consumer dead-letters it.
func (s *Source) delivery(msg jetstream.Msg) *delivery {
	d := &delivery{src: s, msg: msg, attempt: 1}
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 0 {
		d.attempt = int(md.NumDelivered)
	}
	if json.Unmarshal(msg.Data(), &d.m) != nil {
		d.m = handoff.Message{}
	}
	return d
}

// delivery is one delivery of a message by the consumer.
type delivery struct {
	src     *Source
	msg     jetstream.Msg
	m       handoff.Message
	attempt int
}

// Message is the delivered hand-off.
func (d *delivery) Message() handoff.Message { return d.m }

// Attempt is the consumer's delivery count of the message.
func (d *delivery) Attempt() int { return d.attempt }

// Ack acknowledges the message and waits for the server to confirm it:
// nil means the message is gone from the stream. On error it may not be,
// and it is delivered again after AckWait.
func (d *delivery) Ack(ctx context.Context) error {
	if err := d.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("natsjs: ack: %w", err)
	}
	return nil
}

// Retry asks the server to deliver the message again after delay (a
// negative acknowledgement with that delay). Should the request be lost,
// the message comes back after AckWait.
func (d *delivery) Retry(_ context.Context, delay time.Duration) error {
	var err error
	if delay > 0 {
		err = d.msg.NakWithDelay(delay)
	} else {
		err = d.msg.Nak()
	}
	if err != nil {
		return fmt.Errorf("natsjs: retry: %w", err)
	}
	return nil
}

// DeadLetter publishes the message, with reason, its attempt and its
// stream sequence in headers, to the dead-letter stream, and once that
// stream has it acknowledges the original. A failure of the second step
// leaves the message to be delivered again (and dead-lettered again: the
// dead-letter stream's deduplication keeps one copy within its window).
func (d *delivery) DeadLetter(ctx context.Context, reason error) error {
	msg := &nats.Msg{Subject: d.src.cfg.DeadSubject, Data: d.msg.Data(), Header: nats.Header{}}
	for k, v := range d.msg.Headers() {
		if !strings.HasPrefix(k, "Nats-") { // the server's: deduplication, expectations
			msg.Header[k] = v
		}
	}
	if reason == nil {
		reason = errors.New("natsjs: dead-lettered without a reason")
	}
	msg.Header.Set(ReasonHeader, reason.Error())
	msg.Header.Set(AttemptHeader, strconv.Itoa(d.attempt))
	id := ""
	if md, err := d.msg.Metadata(); err == nil {
		seq := strconv.FormatUint(md.Sequence.Stream, 10)
		msg.Header.Set(SequenceHeader, seq)
		id = d.src.cfg.Stream + ":" + seq
	}
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	if _, err := d.src.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("natsjs: dead-letter: %w", err)
	}
	return d.Ack(ctx)
}
