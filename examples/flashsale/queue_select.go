package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/handoff/redisstream"
)

// queueKinds are the values -queue takes; openBroker has a case for each.
var queueKinds = []string{"redis", "nats", "rabbitmq"}

// broker is the hand-off's queue as the sale uses it: where orders are
// published, the consumers that read them, and how many messages it still
// holds (published, not yet acknowledged or dead-lettered).
type broker struct {
	name   string
	pub    handoff.Publisher
	source func(consumer string) handoff.Source
	// left asks the broker how many messages it still holds.
	left func(ctx context.Context) (int64, error)
	// close, if set, releases the broker's connections (and an
	// in-process server) after the sale.
	close func()
}

// openBroker opens the queue -queue names for this run; its redelivery
// timeout is redelivery. A broker added here needs only its case.
func openBroker(ctx context.Context, cfg config, sys *system, redelivery time.Duration) (*broker, error) {
	switch cfg.queue {
	case "redis":
		q, err := redisstream.New(ctx, sys.rdb, redisstream.Config{Stream: sys.prefix + ":orders", Group: "record", Redelivery: redelivery})
		if err != nil {
			return nil, fmt.Errorf("redis stream: %w", err)
		}
		return &broker{name: "redis stream", pub: q, source: q.Source, left: q.Len}, nil
	case "nats":
		return openNATS(ctx, cfg, sys, redelivery)
	case "rabbitmq":
		return openRabbitMQ(ctx, cfg, sys, redelivery)
	}
	return nil, fmt.Errorf("-queue %q: want one of %s", cfg.queue, strings.Join(queueKinds, ", "))
}

// openNATS opens a JetStream hand-off on -nats, or on a NATS server
// started in-process (JetStream in a temporary directory) without it.
func openNATS(ctx context.Context, cfg config, sys *system, redelivery time.Duration) (*broker, error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	url, name := cfg.natsURL, "nats jetstream"
	if url == "" {
		dir, err := os.MkdirTemp("", "flashsale-nats-")
		if err != nil {
			return nil, err
		}
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("nats: embedded server: %w", err)
		}
		go srv.Start()
		closers = append(closers, func() { srv.Shutdown(); srv.WaitForShutdown(); _ = os.RemoveAll(dir) })
		if !srv.ReadyForConnections(10 * time.Second) {
			closeAll()
			return nil, errors.New("nats: the embedded server did not start")
		}
		url, name = srv.ClientURL(), "nats jetstream (in-process)"
	}
	connect := func() (jetstream.JetStream, error) {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			return nil, err
		}
		closers = append(closers, nc.Close)
		return jetstream.New(nc)
	}
	js, err := connect()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("nats: %w", err)
	}
	nc := natsjs.Config{
		Stream: strings.ToUpper(sys.prefix) + "_ORDERS", Subject: sys.prefix + ".orders",
		Consumer: "record", AckWait: redelivery, PollWait: 200 * time.Millisecond,
	}
	pub, err := natsjs.NewPublisher(ctx, js, nc)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("nats: %w", err)
	}
	closers = append(closers, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, nc.Stream)
		_ = js.DeleteStream(dctx, nc.Stream+"_DEAD")
	})
	src, err := natsjs.NewSource(ctx, js, nc)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("nats: %w", err)
	}
	left := func(ctx context.Context) (int64, error) {
		s, err := js.Stream(ctx, nc.Stream)
		if err != nil {
			return 0, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0, err
		}
		return int64(info.State.Msgs), nil // a work queue: acknowledged messages are gone
	}
	return &broker{name: name, pub: pub, source: func(string) handoff.Source { return src }, left: left, close: closeAll}, nil
}

// openRabbitMQ opens a RabbitMQ hand-off on -amqp: a quorum queue of the
// run's own, deleted after the sale, and one connection per consumer.
func openRabbitMQ(ctx context.Context, cfg config, sys *system, redelivery time.Duration) (*broker, error) {
	rc := rabbitmq.Config{Queue: sys.prefix + ".orders", Redelivery: redelivery}
	pub, err := rabbitmq.NewPublisher(ctx, cfg.amqpURL, rc)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	var sources []*rabbitmq.Source
	closeAll := func() {
		for _, s := range sources {
			_ = s.Close()
		}
		_ = pub.Close()
		if conn, err := amqp.Dial(cfg.amqpURL); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(rc.Queue, false, false, false)
				_, _ = ch.QueueDelete(rc.Queue+".dead", false, false, false)
			}
			_ = conn.Close()
		}
	}
	for range max(cfg.consumers, 1) {
		src, err := rabbitmq.NewSource(ctx, cfg.amqpURL, rc)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("rabbitmq: %w", err)
		}
		sources = append(sources, src)
	}
	var next atomic.Int64
	source := func(string) handoff.Source { return sources[int(next.Add(1)-1)%len(sources)] }
	// The queue counts ready messages; the delivered ones not finished
	// are the Sources'. Ready is read on both sides of the Sources' count,
	// so a message moving between the two is counted at least once.
	left := func(ctx context.Context) (int64, error) {
		before, err := pub.Ready(ctx)
		if err != nil {
			return 0, err
		}
		var held int64
		for _, s := range sources {
			held += s.Holding()
		}
		after, err := pub.Ready(ctx)
		return before + held + after, err
	}
	return &broker{name: "rabbitmq quorum queue", pub: pub, source: source, left: left, close: closeAll}, nil
}
