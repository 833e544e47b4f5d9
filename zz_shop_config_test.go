package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A negative Flow.RecordGrace is taken by the flow as zero (the grace is
// the hold time: tiered.Config.RecordHold), yet it skips both of the
// Shop's checks of that grace against the reclaimer's interval: New
// accepts it, and PutOnSale accepts a hold time that the same Shop with
// RecordGrace zero refuses. The wiring is the same; one is refused, the
// other silently accepted.
//
// Broken promise: stockguard.Config / New ("settings that contradict each
// other" fail with stock.ErrInvalid, nothing built) and Shop.PutOnSale
// ("a listing whose hold time ... is not [longer than the reclaimer's
// interval] is refused with an error wrapping stock.ErrInvalid").
func TestZZNegativeRecordGraceIsNotAWayAroundTheGraceCheck(t *testing.T) {
	l := stock.Listing{SKU: "phone", Units: 5, HoldTTL: 500 * time.Millisecond}
	zero, _, _ := shopOn(t, stockguard.Config{})
	if err := zero.PutOnSale(t.Context(), l); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("RecordGrace 0, hold 500ms, reclaim every 1s: %v, want ErrInvalid", err)
	}
	var cfg stockguard.Config
	cfg.Flow = tiered.Config{RecordGrace: -time.Nanosecond}
	if g := cfg.Flow.RecordHold(l.HoldTTL); g != (tiered.Config{}).RecordHold(l.HoldTTL) {
		t.Fatalf("the flow does not treat a negative grace as zero: record hold %v", g)
	}
	neg, _, _ := shopOn(t, cfg)
	if err := neg.PutOnSale(t.Context(), l); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("RecordGrace -1ns (the flow's zero), hold 500ms, reclaim every 1s: %v, want ErrInvalid as with RecordGrace 0", err)
	}
}
