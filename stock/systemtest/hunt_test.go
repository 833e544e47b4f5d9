package systemtest_test

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// TestHunt runs the checker with a RecordGrace (TestSystem runs with none)
// over a few seeds on miniredis+SQLite. The environment widens the hunt:
// STOCKGUARD_HUNT_SEEDS=from-to names the seeds (default 1-3),
// STOCKGUARD_HUNT_BACKEND a backend of TestSystem ("all" for every one;
// default miniredis+sqlite), STOCKGUARD_HUNT_GRACE the RecordGrace
// (default 1.5s) and STOCKGUARD_HUNT_STEPS the steps of each run.
func TestHunt(t *testing.T) {
	spec := cmp.Or(os.Getenv("STOCKGUARD_HUNT_SEEDS"), "1-3")
	var from, to uint64
	if _, err := fmt.Sscanf(spec, "%d-%d", &from, &to); err != nil {
		t.Fatal(err)
	}
	grace, err := time.ParseDuration(cmp.Or(os.Getenv("STOCKGUARD_HUNT_GRACE"), "1.5s"))
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := strconv.Atoi(os.Getenv("STOCKGUARD_HUNT_STEPS"))
	backend := cmp.Or(os.Getenv("STOCKGUARD_HUNT_BACKEND"), "miniredis+sqlite")
	for _, b := range backends() {
		if backend != "all" && b.name != backend {
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
