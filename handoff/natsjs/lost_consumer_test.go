package natsjs_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
)

// lostMsg is an order sent now.
func lostMsg(id string) handoff.Message {
	now := time.UnixMilli(time.Now().UnixMilli())
	return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}, Sent: now, Deadline: now.Add(time.Minute)}
}

// fetchWithin fetches from src for up to within and reports whether the
// order id was delivered (and the last Fetch error).
func fetchWithin(src handoff.Source, id string, within time.Duration) (bool, error) {
	var last error
	for end := time.Now().Add(within); time.Now().Before(end); {
		fctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		ds, err := src.Fetch(fctx, 8)
		cancel()
		if err != nil {
			last = err
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for _, d := range ds {
			if d.Message().Order.ID == id {
				_ = d.Ack(context.Background())
				return true, nil
			}
		}
	}
	return false, last
}

// natsjs's doc (v0.2.0): "A server that comes back without the streams
// (memory storage, or a store lost or replaced) has lost the messages it
// held, but not the hand-off: ... a Fetch whose stream or consumer is not
// found creates them, as NewSource does, and fetches once more." Here the
// server comes back with an empty store, a Publisher stores the next
// order first (creating the stream again, as Publish now does), and the
// Source's connection is back before its next Fetch. The server (the
// system's nats-server, 2.9) answers nothing at all to a pull on a
// consumer it has not, no "consumer not found": the Source must still
// find the consumer lost, create it and deliver the order.
func TestFetchResumesWhenThePublisherCreatedTheStreamFirst(t *testing.T) {
	const port = 6651
	start := privateNATS(t, port)
	stop := start()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	cfg := natsjs.Config{Stream: "LOSTC", Subject: "lostc", Consumer: "record", AckWait: time.Minute, PollWait: 100 * time.Millisecond}
	ctx := context.Background()
	pub, err := natsjs.NewPublisher(ctx, connect(t, url), cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	src, err := natsjs.NewSource(ctx, connect(t, url), cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	if err := pub.Publish(ctx, lostMsg("before")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if ok, err := fetchWithin(src, "before", 5*time.Second); !ok {
		t.Fatalf("order before not delivered: %v", err)
	}

	stop()
	stop = start() // same address, empty store
	t.Cleanup(func() { stop() })
	var perr error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		perr = pub.Publish(pctx, lostMsg("after"))
		cancel()
		if perr == nil {
			break
		}
	}
	if perr != nil {
		t.Fatalf("Publish after the restart: %v", perr)
	}
	time.Sleep(time.Second) // the Source's connection is back (ReconnectWait 50ms)
	if ok, err := fetchWithin(src, "after", 5*time.Second); !ok {
		t.Fatalf("order after, published (Publish returned nil), not delivered within 5s; last Fetch error: %v", err)
	}
}

// privateNATS returns a function that starts the system's nats-server
// binary (the one the shared test server runs) with JetStream on port and
// an empty store of its own, and returns its stop; skipped without it.
func privateNATS(t *testing.T, port int) func() func() {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("no nats-server binary")
	}
	return func() func() {
		cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", t.TempDir())
		if err := cmd.Start(); err != nil {
			t.Fatalf("start nats-server: %v", err)
		}
		for i := 0; ; i++ {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				c.Close()
				break
			}
			if i > 200 {
				t.Fatalf("nats-server on %d not ready", port)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // JetStream ready
		var once sync.Once
		return func() {
			once.Do(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
		}
	}
}

// The same promise when the server has the stream but lost the durable
// consumer (removed by an operator, or its state dropped by the server):
// the Source delivers the next order.
func TestFetchResumesAfterTheConsumerIsLost(t *testing.T) {
	js := connect(t, serverURL(t))
	cfg := config(t, js, time.Minute)
	ctx := context.Background()
	src, err := natsjs.NewSource(ctx, js, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	pub, err := natsjs.NewPublisher(ctx, js, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	if err := js.DeleteConsumer(ctx, cfg.Stream, cfg.Consumer); err != nil {
		t.Fatalf("DeleteConsumer: %v", err)
	}
	if err := pub.Publish(ctx, lostMsg("after")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if ok, err := fetchWithin(src, "after", 5*time.Second); !ok {
		t.Fatalf("order after, published, not delivered within 5s of Fetch; last Fetch error: %v", err)
	}
}
