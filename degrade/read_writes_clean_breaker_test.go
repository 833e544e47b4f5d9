package degrade

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// pausingClock is a stocktest clock that, once armed, stops the n-th call
// made from within (*circuit).open until resumed: the scheduler pausing
// the goroutine at that point.
type pausingClock struct {
	*stocktest.Clock
	armed          atomic.Bool
	n              atomic.Int32
	at             int32
	paused, resume chan struct{}
}

func (c *pausingClock) Now() time.Time {
	if c.armed.Load() {
		buf := make([]byte, 1<<16)
		if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "degrade.(*circuit).open(") && c.n.Add(1) == c.at {
			close(c.paused)
			<-c.resume
		}
	}
	return c.Clock.Now()
}

// Config.PerSKU: a breaker dropped by the LRU "starts closed when next
// needed"; only a breaker that carries no state is dropped, and one that
// let a write at the fallback alone through carries it until a
// recalibration has read it. Here a's recalibration starts while an order of a and b
// is being admitted at the fallback, waits for that write (Place: "A
// recalibration waits for the fallback's Deducts already running"), reads
// after it and sends all traffic back. Later the LRU drops a's breaker,
// closed: a's next order must go to the primary, with no second
// recalibration of a.
func TestClosedBreakerWhoseFallbackWritesWereReadStartsClosed(t *testing.T) {
	clock := &pausingClock{Clock: stocktest.NewClock(stocktest.Epoch), at: 2,
		paused: make(chan struct{}), resume: make(chan struct{})}
	primary := stocktest.NewFaulty(memstock.New(clock.Clock))
	fallback := stocktest.NewFaulty(memstock.New(clock.Clock))
	var mu sync.Mutex
	recal := map[string]int{}
	d, err := New(primary, fallback, Config{PerSKU: 2, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute,
		RampSteps: []float64{},
		Recalibrate: func(_ context.Context, key string) error {
			mu.Lock()
			recal[key]++
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx := t.Context()
	for _, sku := range []string{"a", "b", "e"} {
		for _, m := range []stock.Manager{primary.Manager, fallback.Manager} {
			if err := m.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ab := func(id string) stock.Order {
		return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
	}
	primary.SetFault(stocktest.Down)
	for i := 0; d.State("a") != Degraded || d.State("b") != Degraded; i++ {
		if i > 10 {
			t.Fatal("breakers never opened")
		}
		_ = d.Deduct(ctx, ab("trip"+string(rune('0'+i))))
	}
	primary.SetFault(stocktest.Healthy)
	clock.Advance(30 * time.Second)
	// The order of a and b: paused as its admission checks b's breaker.
	clock.armed.Store(true)
	errAB := make(chan error, 1)
	go func() { errAB <- d.Deduct(ctx, ab("at-fallback")) }()
	<-clock.paused
	clock.armed.Store(false)
	clock.Advance(31 * time.Second) // a's (and b's) OpenFor is over
	if err := d.Deduct(ctx, stock.Order{ID: "starts-a", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err == nil {
		t.Fatal("order of a as its recalibration starts: taken, want ErrBusy")
	}
	for !blockedIn("runRecalibrate", "RWMutex).Lock") { // until a's recalibration waits for the order
		runtime.Gosched()
	}
	close(clock.resume)
	if err := <-errAB; err != nil {
		t.Fatalf("order of a and b admitted at the fallback: %v", err)
	}
	for j := 0; d.State("a") != Primary; j++ { // a's recalibration read it
		if j > 100000 {
			t.Fatalf("a never back: %v", d.State("a"))
		}
		runtime.Gosched()
	}
	_ = d.State("e") // two closed breakers used since a:
	_ = d.State("f") // the LRU drops a, closed
	d.set.mu.Lock()
	_, kept := d.set.m["a"]
	d.set.mu.Unlock()
	if kept {
		t.Fatal("the LRU kept a's breaker, closed and its fallback writes read, past PerSKU")
	}
	deducts := primary.Calls("Deduct")
	err = d.Deduct(ctx, stock.Order{ID: "next-a", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || primary.Calls("Deduct") != deducts+1 || recal["a"] != 1 {
		t.Fatalf("a's breaker dropped while closed, every fallback write of a read by its recalibration: next order of a got %v (primary Deducts +%d), a recalibrated %d times; want it taken by the primary, 1 recalibration",
			err, primary.Calls("Deduct")-deducts, recal["a"])
	}
}
