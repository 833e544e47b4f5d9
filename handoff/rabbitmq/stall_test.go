package rabbitmq_test

import (
	"context"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
)

// stallProxy is a TCP proxy to the broker whose connections can stall: the
// bytes stop flowing both ways and nothing is closed (a partition, a
// peer that stopped answering), as TCP sees it until a timeout.
type stallProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	stalled bool
	resume  chan struct{}
	conns   []net.Conn
}

func startStallProxy(t *testing.T, brokerURL string) (*stallProxy, string) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stallProxy{ln: ln, target: u.Host, resume: make(chan struct{})}
	go s.serve()
	t.Cleanup(func() {
		s.unstall()
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
	})
	u.Host = ln.Addr().String()
	return s, u.String()
}

func (s *stallProxy) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", s.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		s.mu.Lock()
		s.conns = append(s.conns, c, b)
		s.mu.Unlock()
		go s.pipe(b, c)
		go s.pipe(c, b)
	}
}

func (s *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		s.mu.Lock()
		stalled, resume := s.stalled, s.resume
		s.mu.Unlock()
		if stalled {
			<-resume // the bytes are held, as in a partition
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (s *stallProxy) stall() {
	s.mu.Lock()
	s.stalled = true
	s.mu.Unlock()
}

func (s *stallProxy) unstall() {
	s.mu.Lock()
	if s.stalled {
		s.stalled = false
		close(s.resume)
		s.resume = make(chan struct{})
	}
	s.mu.Unlock()
}

// Fetch returns once its context ends (handoff.Source); Consumer.Run
// bounds each Fetch by ConsumerConfig.Poll and its shutdown waits on it.
// On a connection that stalls, Fetch's basic.qos, basic.consume and
// basic.cancel must not wait for the broker's reply past ctx (until
// amqp091's heartbeat gives up on the connection, 15s).
func TestFetchHonoursItsContextOnAStalledConnection(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	st, url := startStallProxy(t, brokerURL)
	cfg := config(t, brokerURL, 500*time.Millisecond)
	src := source(t, url, cfg)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := src.Fetch(ctx0, 8); err != nil { // the consumer works
		t.Fatalf("Fetch before the stall: %v", err)
	}
	cancel0()
	st.stall()
	const budget = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	_, err := src.Fetch(ctx, 8)
	if took := time.Since(start); took > budget+2*time.Second {
		t.Errorf("Fetch with a %v context returned after %v (%v)", budget, took.Round(time.Millisecond), err)
	}
}
