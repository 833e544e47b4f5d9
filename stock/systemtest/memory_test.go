package systemtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// The memory check fails a run whose gate keeps a per-order item past
// Retention: a line record left behind under the flow's prefix (written
// here once the run is at rest, as a purge that missed it would leave it)
// is reported by name; the same run without it passes.
func TestMemoryCheckFindsAKeyLeftBehind(t *testing.T) {
	for _, leave := range []bool{false, true} {
		cfg := wire(t, backends()[0], 1)
		cfg.Steps = 20
		minis := cfg.Clock.(clock).minis
		footprint, reads := cfg.Footprint, 0
		var stray string
		cfg.Footprint = func(ctx context.Context) (map[string]int64, error) {
			reads++
			if reads == 2 && leave {
				for _, k := range minis[0].Keys() {
					if p, ok := strings.CutSuffix(k, ":{sys-a}:state"); ok {
						stray = p + ":{sys-a}:lines"
					}
				}
				if stray == "" {
					t.Fatal("no state hash of sys-a on the server")
				}
				minis[0].HSet(stray, "o-left", "held")
			}
			return footprint(ctx)
		}
		res, err := systemtest.Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if reads != 2 {
			t.Fatalf("leave=%v: the footprint was read %d times, want 2 (before the sale, at rest)", leave, reads)
		}
		var found []systemtest.Violation
		for _, v := range res.Violations {
			if v.Check == systemtest.CheckMemory {
				found = append(found, v)
			}
		}
		switch {
		case !leave && len(res.Violations) != 0:
			t.Fatalf("clean run: %v", res.Violations)
		case leave && (len(found) != 1 || !strings.Contains(found[0].Detail, stray)):
			t.Fatalf("a line record left behind (%s): violations %v, want one memory violation naming it", stray, res.Violations)
		}
	}
}
