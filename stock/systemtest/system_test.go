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
			for _, seed := range systemtest.Seeds(1, b.seeds) {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					systemtest.Check(t, wire(t, b, seed))
				})
			}
		})
	}
}
