package redisstream_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/stock"
)

// privateRedis starts a redis-server without persistence on port (a port
// of this test's own), stopped with the test; skipped without the binary.
func privateRedis(t *testing.T, port int) func() {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
		defer c.Close()
		for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
			if i > 100 {
				t.Fatalf("redis-server on %d not ready", port)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return cmd
	}
	cmd := start()
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(func() { stop() })
	return func() { stop(); cmd = start() }
}

// The README ("A gate that lost its data while a queued hand-off carries
// orders"): a Redis that lost its data "takes the queued orders with it".
// The orders published after it are another matter: Publish returns nil
// ("once it returns nil, Redis has it"), and the adapter contract
// (handoff/doc.go) has Fetch deliver what was published. After a restart
// without persistence the consumer group is gone; XADD creates the
// stream again without it, and every Fetch fails (NOGROUP) for ever: the
// hand-off never resumes, and each order the gate sells from then on
// expires in the queue.
func TestHandoffResumesAfterRedisLostTheStream(t *testing.T) {
	restart := privateRedis(t, 6640)
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6640", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	q, err := redisstream.New(ctx, rdb, redisstream.Config{Stream: "orders", Redelivery: time.Minute, Block: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	src := q.Source("node1-0")
	msg := func(id string) handoff.Message {
		now := time.Now()
		return handoff.Message{Order: stock.Order{ID: id, Items: []stock.Item{{SKU: "sku-a", Qty: 1}}}, Sent: now, Deadline: now.Add(time.Minute)}
	}
	fetch := func(want string) {
		t.Helper()
		var last error
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			ds, err := src.Fetch(fctx, 8)
			cancel()
			if err != nil {
				last = err
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for _, d := range ds {
				if d.Message().Order.ID == want {
					_ = d.Ack(ctx)
					return
				}
			}
		}
		t.Fatalf("order %s, published (Publish returned nil), was not delivered within 3s; last Fetch error: %v", want, last)
	}
	if err := q.Publish(ctx, msg("before")); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	fetch("before")

	restart() // the data is gone, as after a flush or a failover to an empty replica

	var perr error
	for i := 0; i < 50; i++ {
		if perr = q.Publish(ctx, msg("after")); perr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if perr != nil {
		t.Fatalf("Publish after the restart: %v", perr)
	}
	fetch("after")
}
