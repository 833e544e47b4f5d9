package rabbitmq_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

// blackHole is a TCP proxy to the broker that can turn into a black hole: it
// drops the connections it carries and then accepts new ones without ever
// answering (a broker host that stopped answering, a partition with a
// stale load balancer in front).
type blackHole struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	hole  bool
}

func startBlackHole(t *testing.T, brokerURL string) (*blackHole, string) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackHole{ln: ln, target: u.Host}
	go h.serve()
	t.Cleanup(func() { _ = ln.Close(); h.closeAll() })
	u.Host = ln.Addr().String()
	return h, u.String()
}

func (h *blackHole) serve() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		hole := h.hole
		h.mu.Unlock()
		if hole {
			continue // accepted, never answered
		}
		b, err := net.Dial("tcp", h.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		h.mu.Lock()
		h.conns = append(h.conns, b)
		h.mu.Unlock()
		go func() { _, _ = io.Copy(b, c); _ = b.Close() }()
		go func() { _, _ = io.Copy(c, b); _ = c.Close() }()
	}
}

func (h *blackHole) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// blackhole drops every connection and answers no new one.
func (h *blackHole) blackhole() {
	h.mu.Lock()
	h.hole = true
	h.mu.Unlock()
	h.closeAll()
}

func testMessage(id string) handoff.Message {
	now := time.Now()
	return handoff.Message{
		Order:    stock.Order{ID: id, Items: []stock.Item{{SKU: "sku-a", Qty: 1}}},
		Deadline: now.Add(time.Minute), Sent: now,
	}
}

// Publish takes ctx first and must return once ctx ends (STYLE.md: "ctx
// first on every call that does I/O"; rabbitmq.Publish: "it reconnects and
// publishes again, until ctx ends"). A buyer's Place waits on it. Once the
// broker stops answering, no Publish waits out amqp091's 10s dial and
// handshake timeout past its context, and concurrent Publishes do not
// queue behind one another's dials.
func TestPublishHonoursItsContextWhileReconnecting(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	hole, url := startBlackHole(t, brokerURL)
	cfg := config(t, brokerURL, 500*time.Millisecond)
	pub := publisher(t, url, cfg)
	if err := pub.Publish(ctxT(t), testMessage("bh-0")); err != nil {
		t.Fatalf("Publish before the fault: %v", err)
	}
	hole.blackhole()
	time.Sleep(50 * time.Millisecond) // the client sees its connection end

	const buyers, budget = 3, 300 * time.Millisecond
	var wg sync.WaitGroup
	took := make([]time.Duration, buyers)
	errs := make([]error, buyers)
	for i := range buyers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start := time.Now()
			errs[i] = pub.Publish(ctx, testMessage("bh-"+string(rune('a'+i))))
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i := range buyers {
		if errs[i] == nil {
			t.Errorf("buyer %d: Publish returned nil with the broker unreachable", i)
		}
		if took[i] > budget+2*time.Second {
			t.Errorf("buyer %d: Publish with a %v context returned after %v (%v)", i, budget, took[i].Round(time.Millisecond), errs[i])
		}
	}
}

// Fetch, too, must return once its context ends (handoff.Source: "waiting
// until at least one is there or ctx ends"); Consumer.Run bounds each
// Fetch by ConsumerConfig.Poll (500ms) and its shutdown waits on it.
func TestFetchHonoursItsContextWhileReconnecting(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	hole, url := startBlackHole(t, brokerURL)
	cfg := config(t, brokerURL, 500*time.Millisecond)
	src := source(t, url, cfg)
	hole.blackhole()
	time.Sleep(50 * time.Millisecond)
	// The first Fetch meets the closed channel; the next ones reconnect.
	for i := range 3 {
		const budget = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		start := time.Now()
		_, err := src.Fetch(ctx, 8)
		took := time.Since(start)
		cancel()
		if took > budget+2*time.Second {
			t.Fatalf("Fetch %d with a %v context returned after %v (%v)", i, budget, took.Round(time.Millisecond), err)
		}
	}
}

// Close ends a reconnection under way: the attempt that a Publish whose
// context ended left behind (dialling a broker that never answers) does
// not outlive the Publisher.
func TestCloseEndsAReconnection(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	hole, url := startBlackHole(t, brokerURL)
	cfg := config(t, brokerURL, 500*time.Millisecond)
	before := settledGoroutines()
	pub, err := rabbitmq.NewPublisher(ctxT(t), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hole.blackhole()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := pub.Publish(ctx, testMessage("bh-close")); err == nil {
		t.Fatal("Publish returned nil with the broker unreachable")
	}
	start := time.Now()
	_ = pub.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took.Round(time.Millisecond))
	}
	if after := settledGoroutines(); after > before+1 {
		t.Errorf("%d goroutines before the Publisher, %d after its Close: the reconnection outlives it", before, after)
	}
}
