package rabbitmq_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

// The fault cells of the RabbitMQ hand-off, on the broker
// STOCKGUARD_AMQP_URL names. The shared broker is never stopped: each
// cell puts a TCP proxy of its own between its clients and the broker and
// breaks the connections there, which is what a broker restart or a killed
// consumer does to a client (the broker hands back every unacknowledged
// delivery of a connection that ends).

// cellConfig is the hand-off's Config in a cell: queues of the test's own,
// a short Redelivery.
func cellConfig(t *testing.T, url string) rabbitmq.Config {
	cfg := config(t, url, 500*time.Millisecond)
	cfg.PublishTimeout = time.Second
	return cfg
}

// TestFaultBrokerRestart: every connection (the publisher's and the
// consumers') drops mid-sale and new ones are refused for 300ms, as in a
// broker restart; buyers retry what failed and the clients reconnect.
func TestFaultBrokerRestart(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	t.Parallel()
	px, url := startProxy(t, brokerURL)
	cfg := cellConfig(t, brokerURL)
	pub := publisher(t, url, cfg)
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: pub,
		NewSource: func(int) handoff.Source { return source(t, url, cfg) },
		Down: func() {
			px.refuse(true)
			px.cut()
		},
		Outage: 300 * time.Millisecond,
		Up: func() {
			px.refuse(false)
		},
		SettleFor: time.Second,
	}.Run(t)
}

// TestFaultConsumerKilledBeforeAck: a consumer's connection is dropped
// between the Settle of its first batch and the batch's acks, as a
// consumer killed with -9: the broker hands the batch back at once and the
// other consumer settles each order again (a repeat: recorded once).
func TestFaultConsumerKilledBeforeAck(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	t.Parallel()
	cfg := cellConfig(t, brokerURL)
	pub := publisher(t, brokerURL, cfg)
	var killed atomic.Int64
	var killedIDs sync.Map
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: pub,
		NewSource: func(i int) handoff.Source {
			if i != 0 {
				return source(t, brokerURL, cfg)
			}
			px, url := startProxy(t, brokerURL)
			px.refuse(false)
			return handofftest.KillAtAck(source(t, url, cfg), func(id string) {
				killedIDs.Store(id, true)
				killed.Add(1)
				px.refuse(true) // it stays dead
				px.cut()
			})
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

// TestFaultDeliveredTwice: every order's message is published twice (a
// Recorder's retry after a lost confirm; RabbitMQ does not deduplicate):
// both are delivered and settled, each order recorded once.
func TestFaultDeliveredTwice(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	t.Parallel()
	cfg := cellConfig(t, brokerURL)
	pub := publisher(t, brokerURL, cfg)
	out := handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: handofftest.PublishTwice(pub),
		NewSource: func(int) handoff.Source { return source(t, brokerURL, cfg) },
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
	brokerURL := testdb.Need(t, broker)
	t.Parallel()
	cfg := cellConfig(t, brokerURL)
	pub := publisher(t, brokerURL, cfg)
	out := handofftest.FaultSale{Units: 50, Orders: 60, Consumers: 2, Hold: time.Minute, Publisher: pub,
		NewSource: func(int) handoff.Source { return source(t, brokerURL, cfg) },
		Late:      2 * time.Minute}.Run(t)
	for id := range out.Placed {
		if errs := out.Done[id]; len(errs) == 0 || !errors.Is(errs[0], stock.ErrHoldExpired) {
			t.Errorf("order %s ended %v; want stock.ErrHoldExpired", id, errs)
		}
	}
	if len(out.Placed) != 50 {
		t.Errorf("%d orders placed, want 50 (the units)", len(out.Placed))
	}
}

// TestFaultUnreachableAtPublish: the broker cannot be reached for 1.5s
// mid-sale (connections dropped, new ones refused): Place fails for the
// orders whose publish cannot reach it, buyers retry, and the sale goes on
// when it is back.
func TestFaultUnreachableAtPublish(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	t.Parallel()
	px, url := startProxy(t, brokerURL)
	cfg := cellConfig(t, brokerURL)
	pub := publisher(t, url, cfg)
	var failed atomic.Int64
	handofftest.FaultSale{Units: 150, Orders: 200, Consumers: 2, Hold: time.Minute, Publisher: handofftest.CountFailures(pub, &failed),
		NewSource: func(int) handoff.Source { return source(t, brokerURL, cfg) },
		Down: func() {
			px.refuse(true)
			px.cut()
		},
		Outage: 1500 * time.Millisecond,
		Up: func() {
			px.refuse(false)
		},
		SettleFor: time.Second,
	}.Run(t)
	if failed.Load() == 0 {
		t.Errorf("no publish failed while the broker was unreachable: the cell did not run")
	}
}
