package degrade_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A ramp step sends its share of orders to the primary and moves on only
// once the primary has answered one: a step of 0 never moves on (every
// order is turned away busy after an outage, on healthy servers), one of
// 1 or more is no step. New refuses both, and NaN, with nothing built.
func TestNewRefusesARampStepOutsideZeroOne(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	flow := tiered.New(memstock.New(clock), memstock.New(clock), tiered.Config{Clock: clock})
	for _, steps := range [][]float64{{0, 0.5}, {0.1, 1}, {-0.5}, {0.5, math.NaN()}} {
		d, err := degrade.New(flow, nil, degrade.Config{Clock: clock, RampSteps: steps})
		if !errors.Is(err, stock.ErrInvalid) || d != nil {
			t.Errorf("New with RampSteps %v = %v, %v; want nil and an error wrapping stock.ErrInvalid", steps, d, err)
		}
	}
	for _, steps := range [][]float64{nil, {}, {0.01, 0.5, 0.99}} {
		d, err := degrade.New(flow, nil, degrade.Config{Clock: clock, RampSteps: steps})
		if err != nil {
			t.Fatalf("New with RampSteps %v: %v", steps, err)
		}
		d.Close()
	}
}
