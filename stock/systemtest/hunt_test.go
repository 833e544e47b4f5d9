package systemtest_test

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// TestHunt runs the checker with a RecordGrace (TestSystem runs with none)
// over a few seeds on miniredis+SQLite. The environment widens the hunt:
// STOCKGUARD_HUNT_SEEDS=from-to names the seeds (default: a window of
// huntWindow seeds that moves with the minute the run starts, so every run
// checks other seeds than the one before it; the log names them), STOCKGUARD_HUNT_BACKEND a backend of
// TestSystem ("all" for every one; default miniredis+sqlite),
// STOCKGUARD_HUNT_GRACE the RecordGrace (default 1.5s) and
// STOCKGUARD_HUNT_STEPS the steps of each run. A seed that finds a
// violation logs the command that replays it.
func TestHunt(t *testing.T) {
	spec := os.Getenv("STOCKGUARD_HUNT_SEEDS")
	if spec == "" {
		from := huntWindowStart(time.Now())
		spec = fmt.Sprintf("%d-%d", from, from+huntWindow-1)
		t.Logf("seeds %s, the window of this minute (STOCKGUARD_HUNT_SEEDS=%s replays them)", spec, spec)
	}
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
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("seed %d found a violation on %s; replay: %s", seed, b.name, replayCommand(b.name, seed, grace, steps))
						}
					})
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

// huntWindow is how many seeds TestHunt checks by default: within the CI
// run's time on miniredis+SQLite.
const huntWindow = 3

// huntSeeds is the range the default window moves over: seeds 1-500.
const huntSeeds = 500

// huntWindowStart is the first seed of the default window of a run that
// starts at t: runs started in consecutive minutes check consecutive
// windows, and the windows cycle over seeds 1-huntSeeds (in about three
// hours).
func huntWindowStart(t time.Time) uint64 {
	minute := uint64(t.Unix() / 60)
	return 1 + (minute*huntWindow)%(huntSeeds-huntWindow+1)
}

// replayCommand is the command that runs seed on backend alone, with the
// grace and steps of this run.
func replayCommand(backend string, seed uint64, grace time.Duration, steps int) string {
	env := fmt.Sprintf("STOCKGUARD_HUNT_SEEDS=%d-%d STOCKGUARD_HUNT_BACKEND=%s", seed, seed, backend)
	if grace != 1500*time.Millisecond {
		env += " STOCKGUARD_HUNT_GRACE=" + grace.String()
	}
	if steps > 0 {
		env += " STOCKGUARD_HUNT_STEPS=" + strconv.Itoa(steps)
	}
	return fmt.Sprintf("%s go test -race -count=1 -run 'TestHunt/%s/%d$' ./stock/systemtest",
		env, regexp.QuoteMeta(backend), seed)
}

// The default window moves with the minute a run starts: runs a minute
// or more apart (two CI runs of one day) check other seeds, consecutive
// minutes consecutive windows, all within seeds 1-huntSeeds; and the
// replay command names the seed and the backend's subtest exactly.
func TestHuntWindowMovesWithEachRun(t *testing.T) {
	start := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	if a, b := huntWindowStart(start), huntWindowStart(start.Add(10*time.Minute)); a == b {
		t.Fatalf("runs 10 minutes apart both check seeds %d-%d", a, a+huntWindow-1)
	}
	seen := map[uint64]bool{}
	prev := huntWindowStart(start)
	for i := 1; i <= huntSeeds; i++ {
		from := huntWindowStart(start.Add(time.Duration(i) * time.Minute))
		if from < 1 || from+huntWindow-1 > huntSeeds {
			t.Fatalf("minute %d: window %d-%d outside 1-%d", i, from, from+huntWindow-1, huntSeeds)
		}
		if from != prev+huntWindow && from >= prev {
			t.Fatalf("minute %d: window starts at %d after %d, want the next window", i, from, prev)
		}
		seen[from] = true
		prev = from
	}
	if len(seen) < huntSeeds/huntWindow {
		t.Fatalf("%d windows over %d minutes, want every one", len(seen), huntSeeds)
	}
	got := replayCommand("cluster+postgres/buckets", 25, 1500*time.Millisecond, 0)
	want := "STOCKGUARD_HUNT_SEEDS=25-25 STOCKGUARD_HUNT_BACKEND=cluster+postgres/buckets go test -race -count=1 -run 'TestHunt/cluster\\+postgres/buckets/25$' ./stock/systemtest"
	if got != want {
		t.Fatalf("replay command\n%s\nwant\n%s", got, want)
	}
}
