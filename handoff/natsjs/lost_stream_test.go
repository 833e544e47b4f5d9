package natsjs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
)

// natsjs's doc: "Both create the streams and the consumer they use when
// absent, so they can start in either order", and on a restart "The
// nats.Conn reconnects by itself ... Nothing a Source holds is lost". A
// server that comes back without the hand-off's stream (memory storage,
// Config.Storage; or a server whose store was lost or replaced) loses the
// messages it held; the hand-off itself must go on: the orders published
// after it are stored and delivered, as with the RabbitMQ adapter, which
// declares its queues again on every new channel. Here the Publisher
// fails every Publish for ever (so every order placed from then on is
// answered half-way) and the Source every Fetch.
func TestHandoffResumesAfterTheServerLostTheStream(t *testing.T) {
	const port = 6650
	srv, err := startServer(t.TempDir(), port)
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	url := srv.ClientURL()
	js := connect(t, url)
	cfg := natsjs.Config{Stream: "LOST", Subject: "lost", Consumer: "record", AckWait: time.Minute, PollWait: 100 * time.Millisecond}
	ctx := context.Background()
	pub, err := natsjs.NewPublisher(ctx, js, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	src, err := natsjs.NewSource(ctx, connect(t, url), cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	msg := func(id string) handoff.Message {
		now := time.UnixMilli(time.Now().UnixMilli())
		return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}, Sent: now, Deadline: now.Add(time.Minute)}
	}
	publish := func(id string) {
		t.Helper()
		var err error
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			err = pub.Publish(pctx, msg(id))
			cancel()
			if err == nil {
				return
			}
		}
		t.Fatalf("Publish %s still fails 5s after the server is back: %v", id, err)
	}
	fetch := func(id string) {
		t.Helper()
		var last error
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			fctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			ds, err := src.Fetch(fctx, 8)
			cancel()
			if err != nil {
				last = err
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for _, d := range ds {
				if d.Message().Order.ID == id {
					_ = d.Ack(ctx)
					return
				}
			}
		}
		t.Fatalf("order %s, published, not delivered within 5s; last Fetch error: %v", id, last)
	}
	publish("before")
	fetch("before")

	// The server goes down and comes back on the same address with an
	// empty store.
	srv.Shutdown()
	srv.WaitForShutdown()
	srv, err = startServer(t.TempDir(), port)
	if err != nil {
		t.Fatalf("restart NATS: %v", err)
	}

	publish("after")
	fetch("after")
}

// unanswered is a JetStream client whose first publish reaches the stream
// but whose answer is lost, as if the stream had not answered.
type unanswered struct {
	jetstream.JetStream
	lost atomic.Bool
}

func (u *unanswered) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := u.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && u.lost.CompareAndSwap(false, true) {
		return nil, jetstream.ErrNoStreamResponse
	}
	return ack, err
}

// The package doc: Publish's Nats-Msg-Id is the order ID, "a repeat within
// Config.Duplicates is stored once". The publish Publish makes again after
// the stream did not answer carries the same Nats-Msg-Id: when the first
// was stored after all, the order is in the stream once, not twice.
func TestPublishAgainAfterNoAnswerKeepsTheMsgID(t *testing.T) {
	js := connect(t, serverURL(t))
	cfg := config(t, js, time.Minute)
	ctx := context.Background()
	pub, err := natsjs.NewPublisher(ctx, &unanswered{JetStream: js}, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	now := time.UnixMilli(time.Now().UnixMilli())
	m := handoff.Message{Order: stock.Order{ID: "once", Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}, Sent: now, Deadline: now.Add(time.Minute)}
	if err := pub.Publish(ctx, m); err != nil {
		t.Fatalf("Publish, its first answer lost: %v; want nil (published again)", err)
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("Stream info: %v", err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the stream holds %d messages after one Publish; want 1 (the repeat deduplicated)", info.State.Msgs)
	}
}
