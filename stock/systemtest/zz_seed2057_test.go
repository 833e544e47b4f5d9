package systemtest_test

import (
	"testing"

	"github.com/stockguard/stockguard/stock/systemtest"
)

// DESIGN invariant 6 (gate bound) on the default wiring (no RecordGrace,
// as TestSystem): seed 2057 on miniredis+SQLite ends with an order the
// gate's reclaimer returned while its record copy (written late by a
// repeat Deduct after the record was down) is still held.
func TestZZSeed2057GateBound(t *testing.T) {
	for _, b := range backends() {
		if b.name != "miniredis+sqlite" {
			continue
		}
		cfg := wireGrace(t, b, 2057, 0)
		cfg.Steps = 300
		systemtest.Check(t, cfg)
	}
}
