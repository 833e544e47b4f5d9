package systemtest

import (
	"context"
	"os"
	"strconv"
	"testing"
)

// SeedEnv names the variable that makes Seeds return one given seed, to
// replay a failure: STOCKGUARD_SYSTEMTEST_SEED=1234 go test ./...
const SeedEnv = "STOCKGUARD_SYSTEMTEST_SEED"

// Seeds returns the seeds a test runs: base, base+1, ..., n of them, or
// only the seed SeedEnv names when it is set.
func Seeds(base uint64, n int) []uint64 {
	if s := os.Getenv(SeedEnv); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return []uint64{v}
		}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// Check runs cfg and fails t with the seed, the violations and the trace
// leading to them if any promise broke; it logs the run's summary.
func Check(t testing.TB, cfg Config) Result {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("systemtest: seed %d: %v", res.Seed, err)
	}
	t.Log(res.Summary())
	if err := res.Err(); err != nil {
		t.Error(err)
	}
	return res
}
