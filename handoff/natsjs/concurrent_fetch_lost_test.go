package natsjs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/natsjs"
)

// natsjs's Source doc: "It implements handoff.Source and is safe for
// concurrent use". Fetch creates the consumer again when the server lost
// it and keeps it in the Source while other Fetch calls on the same Source
// read it: under the race detector, a race there fails the test.
func TestFetchIsSafeForConcurrentUseWhileTheConsumerIsLost(t *testing.T) {
	// A server of the test's own (the nats-server the module's tests
	// embed), which answers a pull on a lost consumer with an error.
	srv, err := startServer(t.TempDir(), 6652)
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	js := connect(t, srv.ClientURL())
	cfg := config(t, js, time.Minute)
	ctx := context.Background()
	src, err := natsjs.NewSource(ctx, js, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				fctx, cancel := context.WithTimeout(ctx, time.Second)
				_, _ = src.Fetch(fctx, 1)
				cancel()
			}
		}()
	}
	for i := 0; i < 80; i++ {
		time.Sleep(30 * time.Millisecond)
		_ = js.DeleteConsumer(ctx, cfg.Stream, cfg.Consumer) // the server lost it
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
}
