package rabbitmq_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
)

// Source.Close: "Fetch fails after it", and the link's doc: "Close ends
// the attempt". A Fetch waiting for a reconnection whose Dial (given in
// Config.Connection, which the doc says cannot be interrupted) hangs
// must still return once the Source is closed, not for ever.
func TestCloseReleasesAFetchWaitingOnAReconnection(t *testing.T) {
	brokerURL := testdb.Need(t, broker)
	px, url := startProxy(t, brokerURL)
	cfg := config(t, brokerURL, 500*time.Millisecond)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var dials atomic.Int32
	cfg.Connection.Dial = func(network, addr string) (net.Conn, error) {
		if dials.Add(1) > 1 {
			<-hang // a host that never answers the SYN, and a Dial with no timeout
			return nil, context.Canceled
		}
		return net.DialTimeout(network, addr, 5*time.Second)
	}
	src, err := rabbitmq.NewSource(ctxT(t), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	px.cut() // the broker restarts: the next Fetch reconnects
	time.Sleep(200 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := src.Fetch(context.Background(), 1)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	_ = src.Close()
	select {
	case err := <-done:
		t.Logf("Fetch returned after Close: %v", err)
	case <-time.After(3 * time.Second):
		t.Errorf("Fetch waiting on a reconnection has not returned 3s after Close")
	}
}
