package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// The fault cells of the Redis Streams hand-off (handofftest.FaultSale:
// nothing oversold, no lost ack, no order recorded twice, no leak, the
// tiers agreeing), each on a Redis of its own (miniredis, which keeps its
// data over a restart as a server with an append-only file does).

const cellRedelivery = 500 * time.Millisecond

// cell is one cell's queue: its server, and clients that can be cut off
// from it.
type cell struct {
	t  *testing.T
	mr *miniredis.Miniredis
	q  *redisstream.Queue
	n  atomic.Int64
}

func newCell(t *testing.T) *cell {
	t.Helper()
	c := &cell{t: t, mr: miniredis.RunT(t)}
	c.q = c.queue(c.client(nil))
	return c
}

// client is a client of the cell's server whose connections fail while
// link says the link is down (nil: never).
func (c *cell) client(link *link) redis.UniversalClient {
	opt := &redis.Options{Addr: c.mr.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second}
	if link != nil {
		opt.Dialer = link.dial
	}
	rdb := redis.NewClient(opt)
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func (c *cell) queue(rdb redis.UniversalClient) *redisstream.Queue {
	q, err := redisstream.New(context.Background(), rdb, redisstream.Config{Stream: "cell", Redelivery: cellRedelivery, Block: 50 * time.Millisecond})
	if err != nil {
		c.t.Fatalf("redisstream.New: %v", err)
	}
	return q
}

func (c *cell) source(int) handoff.Source { return c.q.Source(fmt.Sprintf("c%d", c.n.Add(1))) }

// link is a client's network path to the server: down refuses new
// connections, cut closes the open ones.
type link struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (l *link) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil, errors.New("connection refused (the link is down)")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		l.conns = append(l.conns, conn)
	}
	return conn, err
}

func (l *link) set(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	if down {
		for _, c := range l.conns {
			_ = c.Close()
		}
		l.conns = nil
	}
}

// TestFaultBrokerRestart: the queue's Redis stops mid-sale and comes back
// 300ms later with its data; every connection drops, buyers retry what
// failed, consumers read on.
func TestFaultBrokerRestart(t *testing.T) {
	t.Parallel()
	c := newCell(t)
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: c.q, NewSource: c.source,
		Down: func() {
			c.mr.Close()
		},
		Outage: 300 * time.Millisecond,
		Up: func() {
			if err := c.mr.Restart(); err != nil {
				t.Errorf("restart: %v", err)
			}
		},
		SettleFor: time.Second,
	}.Run(t)
}

// TestFaultConsumerKilledBeforeAck: a consumer dies between the Settle of
// its first batch and the batch's acks, as one killed with -9: its
// messages stay pending and another consumer claims them after the
// redelivery timeout and settles each again (a repeat: recorded once).
func TestFaultConsumerKilledBeforeAck(t *testing.T) {
	t.Parallel()
	c := newCell(t)
	var killed sync.Map
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: c.q,
		NewSource: func(i int) handoff.Source {
			if i != 0 {
				return c.source(i)
			}
			return handofftest.KillAtAck(c.source(i), func(id string) { killed.Store(id, true) })
		},
		SettleFor: 2 * cellRedelivery,
	}.Run(t)
	n := 0
	killed.Range(func(id, _ any) bool {
		n++
		if got := len(out.Done[id.(string)]); got < 2 {
			t.Errorf("order %s ended %d time(s): the killed consumer's message was not delivered again", id, got)
		}
		return true
	})
	if n == 0 {
		t.Errorf("the killed consumer settled nothing: the cell did not run")
	}
}

// TestFaultDeliveredTwice: every order's message is published twice (a
// retry after a lost reply; a stream does not deduplicate): both are
// delivered and settled, each order recorded once.
func TestFaultDeliveredTwice(t *testing.T) {
	t.Parallel()
	c := newCell(t)
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: handofftest.PublishTwice(c.q), NewSource: c.source,
		SettleFor: time.Second,
	}.Run(t)
	for id := range out.Placed {
		if n := len(out.Done[id]); n != 2 {
			t.Errorf("order %s: %d messages ended, want 2", id, n)
		}
	}
}

// TestFaultOlderThanHold: the consumers start only after every hold has
// expired in the queue: each order is returned as expired, nothing left
// held.
func TestFaultOlderThanHold(t *testing.T) {
	t.Parallel()
	c := newCell(t)
	out := handofftest.FaultSale{Units: 50, Orders: 60, Consumers: 2, Hold: time.Minute, Publisher: c.q, NewSource: c.source,
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

// TestFaultUnreachableAtPublish: the publishers' path to the queue's
// Redis is down for 1.5s mid-sale (connections dropped, new ones
// refused) while the consumers read on: Place fails for the orders whose
// publish cannot reach it, buyers retry, and the sale goes on when it is
// back.
func TestFaultUnreachableAtPublish(t *testing.T) {
	t.Parallel()
	c := newCell(t)
	var l link
	pub := c.queue(c.client(&l))
	var failed atomic.Int64
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: handofftest.CountFailures(pub, &failed),
		NewSource: c.source,
		Down: func() {
			l.set(true)
		},
		Outage: 1500 * time.Millisecond,
		Up: func() {
			l.set(false)
		},
		SettleFor: time.Second,
	}.Run(t)
	if failed.Load() == 0 {
		t.Errorf("no publish failed while the queue was unreachable: the cell did not run")
	}
}
