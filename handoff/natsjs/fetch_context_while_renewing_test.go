package natsjs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff/natsjs"
)

// slowCreate is a JetStream client whose stream creations take 3s once
// slow is set: a server that answers slowly (a client call without a
// deadline waits up to its default 5s timeout for it).
type slowCreate struct {
	jetstream.JetStream
	slow atomic.Bool
}

func (s *slowCreate) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if s.slow.Load() {
		select {
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.JetStream.CreateOrUpdateStream(ctx, cfg)
}

// natsjs Source.Fetch doc: "Fetch returns at most max deliveries, waiting
// until at least one is there or ctx ends (then it returns none and no
// error)"; the Source "is safe for concurrent use". With the consumer
// lost, one Fetch (its context without a deadline) creates it again on a
// slow server; another Fetch of the same Source, with a 300ms context,
// must return when its context ends, not when the first one's creation
// is done.
func TestFetchEndsWithItsContextWhileAnotherCreatesTheConsumer(t *testing.T) {
	srv, err := startServer(t.TempDir(), 6720)
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	base := connect(t, srv.ClientURL())
	js := &slowCreate{JetStream: base}
	cfg := config(t, base, time.Minute)
	ctx := context.Background()
	src, err := natsjs.NewSource(ctx, js, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	if err := base.DeleteConsumer(ctx, cfg.Stream, cfg.Consumer); err != nil { // the server lost it
		t.Fatal(err)
	}
	js.slow.Store(true)
	first := make(chan struct{})
	firstCtx, stopFirst := context.WithCancel(ctx) // no deadline
	go func() {
		defer close(first)
		_, _ = src.Fetch(firstCtx, 1) // creates the consumer again, slowly
	}()
	time.Sleep(200 * time.Millisecond)
	fctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	ds, err := src.Fetch(fctx, 1)
	took := time.Since(start)
	if took > 800*time.Millisecond {
		t.Errorf("Fetch with a 300ms context returned after %v (%d deliveries, %v); want by about 300ms", took.Round(time.Millisecond), len(ds), err)
	}
	js.slow.Store(false)
	stopFirst()
	<-first
}
