package systemtest_test

import (
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// TestSystem runs the checker on every backend pairing, several seeds
// each: the composed flow keeps its promises under random interleavings
// and faults at every hand-off.
func TestSystem(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			n := b.seeds
			if testing.Short() {
				n = max(1, n/4)
			}
			for _, seed := range systemtest.Seeds(1, n) {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					systemtest.Check(t, wire(t, b, seed))
				})
			}
		})
	}
}
