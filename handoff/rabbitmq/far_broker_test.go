package rabbitmq_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
)

// startLatencyProxy proxies to the broker with oneWay added to every
// byte in each direction (a broker in another region: a 300ms round
// trip), order kept; closed with the test.
func startLatencyProxy(t *testing.T, brokerURL string, oneWay time.Duration) string {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	type chunk struct {
		at time.Time
		b  []byte
	}
	pipe := func(dst, src net.Conn) {
		q := make(chan chunk, 1024)
		go func() {
			for c := range q {
				time.Sleep(time.Until(c.at))
				if _, err := dst.Write(c.b); err != nil {
					return
				}
			}
			_ = dst.Close()
		}()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{time.Now().Add(oneWay), append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				close(q)
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, b)
			mu.Unlock()
			go pipe(b, c)
			go pipe(c, b)
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

// handoff.ConsumerConfig.Poll defaults to 500ms and Consumer.Run bounds
// each Fetch by it. With a broker a 300ms round trip away, basic.qos and
// basic.consume take 600ms: Fetch must still deliver the queue's
// messages (it did before Fetch cut qos and consume at its context),
// not close its channel on every call and deliver nothing for ever.
func TestFetchDeliversFromABrokerFartherThanItsContext(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	cfg := config(t, brokerURL, 30*time.Second)
	pub := publisher(t, brokerURL, cfg)
	for i := range 5 {
		if err := pub.Publish(ctxT(t), testMessage(fmt.Sprintf("far-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	far := startLatencyProxy(t, brokerURL, 150*time.Millisecond)
	src, err := rabbitmq.NewSource(ctxT(t), far, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got := 0
	for end := time.Now().Add(12 * time.Second); got < 5 && time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ds, err := src.Fetch(ctx, 8)
		cancel()
		if err != nil {
			t.Logf("Fetch: %v", err)
			time.Sleep(100 * time.Millisecond)
		}
		for _, d := range ds {
			if d.Ack(context.Background()) == nil {
				got++
			}
		}
	}
	if got < 5 {
		t.Errorf("%d of 5 orders acknowledged in 12s of 500ms Fetches from a broker 300ms away", got)
	}
}

// A Fetch whose context ends before the broker answered must not close
// the channel the Source's other deliveries came on: their Acks would be
// lost and the messages delivered again.
func TestAnAckOutlastsAnotherFetchsContextOnAFarBroker(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	cfg := config(t, brokerURL, 30*time.Second)
	pub := publisher(t, brokerURL, cfg)
	if err := pub.Publish(ctxT(t), testMessage("far-ack")); err != nil {
		t.Fatal(err)
	}
	far := startLatencyProxy(t, brokerURL, 150*time.Millisecond)
	src, err := rabbitmq.NewSource(ctxT(t), far, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	ds, err := src.Fetch(ctx, 1)
	cancel()
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch: %d deliveries, %v", len(ds), err)
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, err := src.Fetch(short, 1); err != nil {
		t.Fatalf("Fetch with a short context: %v", err)
	}
	cancel()
	if err := ds[0].Ack(context.Background()); err != nil {
		t.Fatalf("Ack after another Fetch's context ended: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	n, err := pub.Ready(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d messages ready again after their Ack: another Fetch's context closed the channel they came on", n)
	}
}
