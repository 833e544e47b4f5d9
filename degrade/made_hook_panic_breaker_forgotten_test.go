package degrade_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/observe"
)

// Config.PerSKU "is how many closed ones no call is using are kept: least
// recently used ones beyond it are forgotten ... So the breakers kept are
// at most PerSKU, plus those of the SKUs touched during an outage ...,
// plus those of the calls running"; Config.Observer: "Each breaker is
// reported as it is made, with From \"\"". The package already holds that
// an Observer.Breaker hook that panics on a caller's goroutine (the caller
// recovers it) does not jam a breaker (TestBreakerHookPanicLeavesTheBreakerWorking).
// Here the hook panics once, as x's breaker is reported made. The call
// has ended, nothing is open, and x's breaker is closed and unused: once
// two other SKUs are used after it with PerSKU 1, it must be forgotten,
// so x's next call makes (and reports) a new one.
func TestBreakerMadeHookPanicStillLetsTheBreakerBeForgotten(t *testing.T) {
	var mu sync.Mutex
	made := map[string]int{}
	f := newFixture(t, degrade.Config{PerSKU: 1, OpenFor: time.Hour, Observer: observe.Observer{
		Breaker: func(b observe.Breaker) {
			if b.From != "" {
				return
			}
			mu.Lock()
			made[b.Name]++
			first := b.Name == "x" && made["x"] == 1
			mu.Unlock()
			if first {
				panic("hook")
			}
		},
	}})
	for _, sku := range []string{"x", "a", "b"} {
		f.sale(sku, 100)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the hook's panic did not reach the caller")
			}
		}()
		_ = f.deduct("x0", "x", 1)
	}()
	for i, sku := range []string{"a", "b", "a", "b"} {
		if err := f.deduct(fmt.Sprint("o", i), sku, 1); err != nil {
			t.Fatalf("order of %s: %v", sku, err)
		}
	}
	if err := f.deduct("x1", "x", 1); err != nil {
		t.Fatalf("order of x: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if made["x"] != 2 {
		t.Fatalf("x's breaker made %d times, want 2: closed, unused and beyond PerSKU 1 after a and b, it is forgotten and made again (made %v)", made["x"], made)
	}
}
