package systemtest_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// TestReview13Hunt runs the checker over a range of seeds named by
// STOCKGUARD_REVIEW13_SEEDS=from-to (skipped without it), on the backend
// STOCKGUARD_REVIEW13_BACKEND names (all by default), with
// STOCKGUARD_REVIEW13_GRACE as tiered.Config.RecordGrace and
// STOCKGUARD_REVIEW13_STEPS steps if set.
func TestReview13Hunt(t *testing.T) {
	spec := os.Getenv("STOCKGUARD_REVIEW13_SEEDS")
	if spec == "" {
		t.Skip("STOCKGUARD_REVIEW13_SEEDS not set")
	}
	var from, to uint64
	if _, err := fmt.Sscanf(spec, "%d-%d", &from, &to); err != nil {
		t.Fatal(err)
	}
	var grace time.Duration
	if g := os.Getenv("STOCKGUARD_REVIEW13_GRACE"); g != "" {
		var err error
		if grace, err = time.ParseDuration(g); err != nil {
			t.Fatal(err)
		}
	}
	steps, _ := strconv.Atoi(os.Getenv("STOCKGUARD_REVIEW13_STEPS"))
	backend := os.Getenv("STOCKGUARD_REVIEW13_BACKEND")
	for _, b := range backends() {
		if backend != "" && b.name != backend {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			for seed := from; seed <= to; seed++ {
				t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
					cfg := wireGrace(t, b, seed, grace)
					if steps > 0 {
						cfg.Steps = steps
					}
					systemtest.Check(t, cfg)
				})
			}
		})
	}
}
