package degrade_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/observe"
)

// Config.PerSKU "is how many of them that carry no state are kept: least
// recently used ones beyond it are forgotten, and one forgotten starts
// closed when next needed"; a breaker that carries state "is never
// forgotten". Each breaker is reported to the Observer as it is made
// (From ""), so a SKU whose breaker was forgotten is reported again.
func TestPerSKUKeepsClosedBreakersUpToPerSKUAndEveryOpenOne(t *testing.T) {
	var mu sync.Mutex
	made := map[string]int{}
	f := newFixture(t, degrade.Config{PerSKU: 2, OpenFor: time.Hour, Observer: observe.Observer{
		Breaker: func(b observe.Breaker) {
			if b.From == "" {
				mu.Lock()
				made[b.Name]++
				mu.Unlock()
			}
		},
	}})
	for _, sku := range []string{"a", "b", "c", "d", "e"} {
		f.sale(sku, 100)
	}
	f.trip("a", "a")
	for i, sku := range []string{"b", "c", "d", "e", "b", "c", "d", "e"} {
		if err := f.deduct(fmt.Sprint("o", i), sku, 1); err != nil {
			t.Fatalf("order of %s: %v", sku, err)
		}
	}
	if st := f.d.State("a"); st != degrade.Degraded {
		t.Fatalf("a's breaker, open, after 4 other SKUs with PerSKU 2: %v, want degraded", st)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"": 1, "a": 1, "b": 2, "c": 2, "d": 2, "e": 2}
	for k, n := range want {
		if made[k] != n {
			t.Fatalf("breakers made %v, want %v: the open one kept, the closed ones beyond 2 forgotten", made, want)
		}
	}
}
