package degrade

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// blockedIn reports whether some goroutine's stack shows all of marks.
func blockedIn(marks ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		ok := true
		for _, m := range marks {
			ok = ok && strings.Contains(g, m)
		}
		if ok {
			return true
		}
	}
	return false
}

// Mode ForceFallback "sends all traffic to the fallback (rate limited)";
// with FallbackLimit rate.Inf nothing may refuse an order then. Here the
// order of SKU a waits for its fallback lock, which it shares with SKUs x
// and y (the 64 locks are hashed by SKU): y's recalibration, started
// before the operator forced the fallback, waits for a slow fallback write
// of x. Meanwhile other SKUs are looked at and the LRU (PerSKU 3) drops
// a's breaker. Nothing in the docs lets that refuse the order; PerSKU only
// bounds the breakers kept.
func TestZZForcedFallbackOrderWaitingOnASharedStripeIsTaken(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	primary := stocktest.NewFaulty(memstock.New(clock))
	fallback := stocktest.NewFaulty(memstock.New(clock))
	d, err := New(primary, fallback, Config{PerSKU: 3, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute,
		Recalibrate: func(context.Context, string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx := t.Context()
	// x, y, a: three SKUs of one fallback lock.
	var same []string
	want := d.fbStripe("a")
	for i := 0; len(same) < 2; i++ {
		if s := fmt.Sprint("s", i); d.fbStripe(s) == want {
			same = append(same, s)
		}
	}
	x, y, a := same[0], same[1], "a"
	for _, sku := range []string{x, y, a, "e1", "e2", "e3"} {
		for _, m := range []stock.Manager{primary.Manager, fallback.Manager} {
			if err := m.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := 0
	buy := func(sku string) error {
		n++
		return d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", n), Items: []stock.Item{{SKU: sku, Qty: 1}}})
	}
	trip := func(sku string) {
		for i := 0; d.State(sku) != Degraded; i++ {
			if i > 10 {
				t.Fatalf("breaker of %s never opened", sku)
			}
			_ = buy(sku)
		}
	}
	primary.SetFault(stocktest.Down)
	trip(y)
	clock.Advance(30 * time.Second)
	trip(x)
	trip(a)
	clock.Advance(31 * time.Second) // y's OpenFor is over, x's and a's not
	// A slow fallback write of x holds the shared lock.
	entered, release := make(chan struct{}), make(chan struct{})
	fallback.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" && len(c.SKUs) == 1 && c.SKUs[0] == x {
			close(entered)
			<-release
		}
	})
	errX := make(chan error, 1)
	go func() { errX <- buy(x) }()
	<-entered
	// y's recalibration starts, and waits for x's write.
	if err := buy(y); err == nil {
		t.Fatalf("order of y while it starts recalibrating: taken, want ErrBusy")
	}
	for d.fb[want].TryRLock() { // until the recalibration waits for the lock
		d.fb[want].RUnlock()
		runtime.Gosched()
	}
	d.SetMode(ForceFallback)
	errA := make(chan error, 1)
	go func() { errA <- buy(a) }()
	for !blockedIn("enterFallback", "RLock") { // a's order waits for the lock
		select {
		case err := <-errA:
			errA <- err
			goto done
		default:
			runtime.Gosched()
		}
	}
	for _, e := range []string{"e1", "e2", "e3"} {
		_ = d.State(e) // other SKUs looked at: the LRU drops x, y, then a
	}
done:
	close(release)
	if err := <-errX; err != nil {
		t.Fatalf("slow order of x: %v", err)
	}
	if err := <-errA; err != nil {
		t.Fatalf("ForceFallback, FallbackLimit rate.Inf: the order of a got %v (fallback Deducts %d); want it taken by the fallback",
			err, fallback.Calls("Deduct"))
	}
}
