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
// order of SKU a waits for a's fallback lock: a's recalibration, started
// before the operator forced the fallback, waits for a slow fallback
// write of a that began while a's breaker was open. Meanwhile other SKUs
// are looked at, more than PerSKU (3). Nothing in the docs lets that
// refuse the order; PerSKU only bounds the breakers kept.
func TestForcedFallbackOrderWaitingForARecalibrationIsTaken(t *testing.T) {
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
	for _, sku := range []string{"a", "e1", "e2", "e3"} {
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
	primary.SetFault(stocktest.Down)
	for i := 0; d.State("a") != Degraded; i++ {
		if i > 10 {
			t.Fatal("breaker of a never opened")
		}
		_ = buy("a")
	}
	// A slow fallback write of a holds a's fallback lock.
	entered, release := make(chan struct{}), make(chan struct{})
	fallback.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" && len(c.SKUs) == 1 && c.SKUs[0] == "a" {
			fallback.SetBefore(nil)
			close(entered)
			<-release
		}
	})
	errSlow := make(chan error, 1)
	go func() { errSlow <- buy("a") }()
	<-entered
	clock.Advance(time.Minute) // a's OpenFor is over
	// a's recalibration starts, and waits for the slow write.
	if err := buy("a"); err == nil {
		t.Fatalf("order of a while it starts recalibrating: taken, want ErrBusy")
	}
	for !blockedIn("runRecalibrate", "RWMutex).Lock") {
		runtime.Gosched()
	}
	d.SetMode(ForceFallback)
	errA := make(chan error, 1)
	go func() { errA <- buy("a") }()
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
		_ = d.State(e) // other SKUs looked at, more than PerSKU
	}
done:
	close(release)
	if err := <-errSlow; err != nil {
		t.Fatalf("slow order of a: %v", err)
	}
	if err := <-errA; err != nil {
		t.Fatalf("ForceFallback, FallbackLimit rate.Inf: the order of a got %v (fallback Deducts %d); want it taken by the fallback",
			err, fallback.Calls("Deduct"))
	}
}
