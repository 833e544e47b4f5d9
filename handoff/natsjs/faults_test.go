package natsjs_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
)

// The fault cells of the NATS hand-off. Each starts a NATS server of its
// own (in-process, JetStream on a temporary directory, its own port), so
// that stopping it touches no other test, and runs a sale through it.

// private is a NATS server a test owns: it can stop and restart it on the
// same port and storage.
type private struct {
	t    *testing.T
	dir  string
	port int
	mu   sync.Mutex
	srv  *server.Server
}

func startPrivate(t *testing.T) *private {
	t.Helper()
	p := &private{t: t, dir: t.TempDir(), port: -1}
	p.start()
	p.port = p.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(p.stop)
	return p
}

func (p *private) url() string { return "nats://127.0.0.1:" + strconv.Itoa(p.port) }

func (p *private) start() {
	p.t.Helper()
	srv, err := startServer(p.dir, p.port)
	if err != nil {
		p.t.Fatalf("start NATS: %v", err)
	}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
}

func (p *private) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		p.srv.Shutdown()
		p.srv.WaitForShutdown()
		p.srv = nil
	}
}

// cellConfig is the hand-off's Config in a cell: names of the test's own,
// a short AckWait (a consumer that stopped is replaced within it).
func cellConfig(t *testing.T, js jetstream.JetStream) natsjs.Config {
	return config(t, js, 500*time.Millisecond)
}

// cell returns a publisher and a source factory on srv.
func cell(t *testing.T, srv *private) (handoff.Publisher, natsjs.Config, func(i int) (handoff.Source, *nats.Conn)) {
	t.Helper()
	js := connect(t, srv.url())
	cfg := cellConfig(t, js)
	pub, err := natsjs.NewPublisher(ctxT(t), js, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	newSource := func(int) (handoff.Source, *nats.Conn) {
		nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatalf("JetStream: %v", err)
		}
		src, err := natsjs.NewSource(ctxT(t), js, cfg)
		if err != nil {
			t.Fatalf("NewSource: %v", err)
		}
		return src, nc
	}
	return pub, cfg, newSource
}

func plain(f func(int) (handoff.Source, *nats.Conn)) func(int) handoff.Source {
	return func(i int) handoff.Source { s, _ := f(i); return s }
}

// TestFaultBrokerRestart: the server stops and starts again (same port,
// same storage) mid-sale, while buyers place orders and consumers settle
// them. Buyers retry what failed; the clients reconnect.
func TestFaultBrokerRestart(t *testing.T) {
	t.Parallel()
	srv := startPrivate(t)
	pub, _, newSource := cell(t, srv)
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: pub, NewSource: plain(newSource),
		Down: func() {
			srv.stop()
		},
		Outage: 300 * time.Millisecond,
		Up: func() {
			srv.start()
		},
		SettleFor: time.Second,
	}.Run(t)
}

// TestFaultConsumerKilledBeforeAck: a consumer's connection is closed
// between the Settle of its first batch and the batch's acks, as a
// consumer killed with -9 (the server sees the connection go and no ack):
// the server delivers the batch again after AckWait, to the other
// consumer, which settles each order again (a repeat: recorded once).
func TestFaultConsumerKilledBeforeAck(t *testing.T) {
	t.Parallel()
	srv := startPrivate(t)
	pub, _, newSource := cell(t, srv)
	var killed atomic.Int64
	var killedIDs sync.Map
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: pub,
		NewSource: func(i int) handoff.Source {
			src, nc := newSource(i)
			if i != 0 {
				return src
			}
			return handofftest.KillAtAck(src, func(id string) { killedIDs.Store(id, true); killed.Add(1); nc.Close() })
		},
		SettleFor: time.Second,
	}.Run(t)
	if killed.Load() == 0 {
		t.Errorf("the killed consumer settled nothing: the cell did not run")
	}
	// Its batch was delivered again and settled by the other: the killed
	// consumer's Settle told Done once, the redelivery once more.
	killedIDs.Range(func(id, _ any) bool {
		if n := len(out.Done[id.(string)]); n < 2 {
			t.Errorf("order %s ended %d time(s): the killed consumer's message was not delivered again", id, n)
		}
		return true
	})
}

// TestFaultDeliveredTwice: the ack of every other first delivery is lost
// (the consumer thinks it acknowledged; the server never heard), so those
// messages are delivered a second time after AckWait and settled again:
// each order is recorded once, and Done hears of it at least twice (more
// if a busy machine let an AckWait pass during a Settle).
func TestFaultDeliveredTwice(t *testing.T) {
	t.Parallel()
	srv := startPrivate(t)
	pub, _, newSource := cell(t, srv)
	var lost sync.Map
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: pub,
		NewSource: func(i int) handoff.Source {
			src, _ := newSource(i)
			return lostAck{Source: src, lost: &lost}
		},
		SettleFor: 2 * time.Second,
	}.Run(t)
	n := 0
	lost.Range(func(k, _ any) bool {
		n++
		if errs := out.Done[k.(string)]; len(errs) < 2 {
			t.Errorf("order %s: its first ack was lost and Done heard of it %d times; want the redelivery settled too", k, len(errs))
		}
		return true
	})
	if n == 0 {
		t.Errorf("no ack was lost: the cell did not run")
	}
}

// lostAck drops the ack of every other first delivery and says it went.
type lostAck struct {
	handoff.Source
	lost *sync.Map // order IDs whose ack was dropped
}

var flip atomic.Int64

func (s lostAck) Fetch(ctx context.Context, max int) ([]handoff.Delivery, error) {
	ds, err := s.Source.Fetch(ctx, max)
	for i, d := range ds {
		if d.Attempt() == 1 && flip.Add(1)%2 == 0 {
			ds[i] = droppedAck{Delivery: d, lost: s.lost}
		}
	}
	return ds, err
}

type droppedAck struct {
	handoff.Delivery
	lost *sync.Map
}

func (d droppedAck) Ack(context.Context) error {
	d.lost.Store(d.Message().Order.ID, true)
	return nil
}

// TestFaultOlderThanHold: the consumers start only after every hold has
// expired (the clock passes the hold time while the orders wait in the
// queue): every message is settled through the refusal path, each order
// returned as expired, nothing recorded, nothing left held.
func TestFaultOlderThanHold(t *testing.T) {
	t.Parallel()
	srv := startPrivate(t)
	pub, _, newSource := cell(t, srv)
	out := handofftest.FaultSale{Units: 50, Orders: 60, Consumers: 2, Hold: time.Minute, Publisher: pub, NewSource: plain(newSource),
		Late: 2 * time.Minute}.Run(t)
	for id := range out.Placed {
		if errs := out.Done[id]; len(errs) == 0 || !errors.Is(errs[0], stock.ErrHoldExpired) {
			t.Errorf("order %s ended %v; want stock.ErrHoldExpired", id, errs)
		}
	}
	if len(out.Placed) != 50 {
		t.Errorf("%d orders placed, want 50 (the units)", len(out.Placed))
	}
}

// TestFaultUnreachableAtPublish: the server is down for a while mid-sale:
// Place fails for the orders whose publish cannot reach it (the gate hold
// stays, for the buyer's retry or the reclaimer), buyers retry, and the
// sale goes on when it is back.
func TestFaultUnreachableAtPublish(t *testing.T) {
	t.Parallel()
	srv := startPrivate(t)
	pub, _, newSource := cell(t, srv)
	var failed atomic.Int64
	counting := handofftest.CountFailures(pub, &failed)
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: counting, NewSource: plain(newSource),
		Down: func() {
			srv.stop()
		},
		Outage: 1500 * time.Millisecond,
		Up: func() {
			srv.start()
		},
		SettleFor: time.Second,
	}.Run(t)
	if failed.Load() == 0 {
		t.Errorf("no publish failed while the server was down: the cell did not run")
	}
}
