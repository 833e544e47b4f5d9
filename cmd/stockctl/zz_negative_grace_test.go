package main

import (
	"testing"
)

// stockctl's help: "exit codes: ... 2 usage error: bad flags or arguments";
// --record-grace is "the shop's tiered.Config.RecordGrace", which
// stockguard.New refuses when negative ("a negative one, which the flow
// would take as zero, is refused", stockguard.Config.Flow) and tiered takes
// as zero. 'stockctl --record-grace -5m put-on-sale' is not refused: it
// lists the SKU on both tiers with the record's hold the hold time again
// (30m for 15m), not what the flag says, exit 0.
func TestPutOnSaleRefusesANegativeRecordGrace(t *testing.T) {
	forEach(t, func(t *testing.T, s *shop) {
		r := s.run("--record-grace", "-5m", "put-on-sale", "tv", "3")
		if r.code != exitUsage {
			t.Errorf("stockctl --record-grace -5m put-on-sale tv 3: exit %d, want %d (a bad flag)\nstdout:\n%s\nstderr:\n%s", r.code, exitUsage, r.out, r.err)
		}
		if _, err := s.record.Levels(s.ctx, "tv"); err == nil {
			t.Errorf("the refused put-on-sale wrote tv to the record")
		}
		if _, err := s.gate.Levels(s.ctx, "tv"); err == nil {
			t.Errorf("the refused put-on-sale wrote tv to the gate")
		}
	})
}
