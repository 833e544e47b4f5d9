package handoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Recorder made over a nil Publisher or a nil gate answers Record and
// Admit with an error wrapping stock.ErrInvalid: bad wiring is an error,
// not a panic on the first order.
func TestRecorderOverANilPartAnswersErrInvalid(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(t0)
	gate := memstock.New(clock)
	if err := gate.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for name, rec := range map[string]*handoff.Recorder{
		"nil Publisher": handoff.NewRecorder(nil, gate, handoff.RecorderConfig{Clock: clock}),
		"nil gate":      handoff.NewRecorder(handofftest.NewMemory(time.Hour), nil, handoff.RecorderConfig{Clock: clock}),
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: Record panicked: %v; want an error wrapping stock.ErrInvalid", name, p)
				}
			}()
			if err := rec.Record(ctx, order("o-"+name, 1)); !errors.Is(err, stock.ErrInvalid) {
				t.Errorf("%s: Record = %v; want an error wrapping stock.ErrInvalid", name, err)
			}
		}()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: Admit panicked: %v; want an error wrapping stock.ErrInvalid", name, p)
				}
			}()
			if err := rec.Admit(ctx, order("o-"+name, 1)); !errors.Is(err, stock.ErrInvalid) {
				t.Errorf("%s: Admit = %v; want an error wrapping stock.ErrInvalid", name, err)
			}
		}()
	}
}
