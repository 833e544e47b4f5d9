package main

import (
	"testing"
)

// stockctl's help: "exit codes: ... 2 usage error: bad flags or arguments";
// --record-grace is "the shop's tiered.Config.RecordGrace", which
// stockguard.New refuses when negative ("a negative one, which the flow
// would take as zero, is refused", stockguard.Config.Flow) and tiered takes
// as zero. 'stockctl --record-grace -5m put-on-sale' is a bad flag: exit 2,
// nothing listed (it used to list the SKU on both tiers with the record's
// hold the hold time again, 30m for 15m, exit 0).
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

// The same for --timeout ("bound on the whole command, 0 for none"): -1s is
// neither a bound nor 0 (it used to be taken as none: put-on-sale wrote
// both tiers, exit 0), so the help's "2 usage error: bad flags" is due.
func TestPutOnSaleRefusesANegativeTimeout(t *testing.T) {
	s := newShop(t, backends()[0]) // miniredis + SQLite
	r := s.run("--timeout", "-1s", "put-on-sale", "tv", "3")
	if r.code != exitUsage {
		t.Errorf("stockctl --timeout -1s put-on-sale tv 3: exit %d, want %d (a bad flag)\nstdout:\n%s\nstderr:\n%s", r.code, exitUsage, r.out, r.err)
	}
	if _, err := s.record.Levels(s.ctx, "tv"); err == nil {
		t.Errorf("the refused put-on-sale wrote tv to the record")
	}
}
