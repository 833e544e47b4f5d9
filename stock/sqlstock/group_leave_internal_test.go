package sqlstock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// A grouped Deduct whose caller leaves after its group took it from the
// queue but before the group began to write was sent nothing: the caller
// gets its context's error, not an unknown outcome, and the group leaves
// the order out (here it is left with none, so it writes nothing and gives
// the lane's slot back).
func TestGroupCallerLeavingBeforeTheWriteIsNotAnUnknownOutcome(t *testing.T) {
	s := reviewStore(t)
	g := s.group
	if g == nil {
		t.Fatal("no grouper")
	}
	items := []stock.Item{{SKU: "a", Qty: 1}}
	key := g.laneKey(items)
	l := &lane{flying: g.flying} // every slot in flight: the call queues
	g.mu.Lock()
	g.lanes[key] = l
	g.mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- g.do(ctx, stock.Order{ID: "o1", Items: items}, items) }()
	for queued := false; !queued; {
		time.Sleep(time.Millisecond)
		g.mu.Lock()
		queued = len(l.queue) == 1
		g.mu.Unlock()
	}
	g.mu.Lock()
	batch := g.take(key, l) // the next group takes it; it writes nothing yet
	g.mu.Unlock()
	cancel()
	err := <-res
	if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("caller left before its group wrote: %v; want its context's error, not an unknown outcome", err)
	}
	g.drain(key, l, batch) // leaves the order out: nothing to write
	g.mu.Lock()
	defer g.mu.Unlock()
	if l.flying != g.flying-1 {
		t.Fatalf("lane has %d transactions in flight after an empty group, want %d", l.flying, g.flying-1)
	}
}
