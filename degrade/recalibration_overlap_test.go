package degrade_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Config.Recalibrate "runs (in the background, once per breaker
// reopening) before any traffic returns to the primary". With per-SKU
// breakers, more SKUs than PerSKU are used while a's recalibration runs;
// were a's breaker forgotten, the SKU's next breaker would recalibrate
// again and send traffic back while the first recalibration of a still
// runs (and, when it ends, writes the gate from what it read before the
// orders then taken there). No order of a may reach the gate while a
// recalibration of a is still running.
func TestNoTrafficToTheGateWhileARecalibrationOfTheSKURuns(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := stocktest.NewFaulty(memstock.New(clock))
	flow := tiered.New(gate, record, tiered.Config{Clock: clock})
	var running, calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	d := mustNew(t, flow, nil, degrade.Config{
		PerSKU: 1, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute, RampSteps: []float64{},
		Recalibrate: func(ctx context.Context, key string) error {
			if key != "a" {
				return nil
			}
			running.Add(1)
			defer running.Add(-1)
			if calls.Add(1) == 1 {
				close(started)
				<-release
			}
			return nil
		},
	})
	defer close(release)
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := d.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	buy := func(sku string) error {
		n++
		return d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", n), Items: []stock.Item{{SKU: sku, Qty: 1}}})
	}
	gate.SetFault(stocktest.Down)
	for i := 0; d.State("a") != degrade.Degraded; i++ {
		if i > 10 {
			t.Fatal("the breaker of a never opened")
		}
		_ = buy("a")
	}
	gate.SetFault(stocktest.Healthy)
	clock.Advance(time.Minute)
	_ = buy("a") // starts the first recalibration of a
	<-started
	_ = d.State("b") // past PerSKU, a's breaker recalibrating
	for i := 0; i < 1000 && d.State("a") != degrade.Primary; i++ {
		_ = buy("a") // a's next breaker recalibrates and returns traffic
		runtime.Gosched()
	}
	deducts := gate.Calls("Deduct")
	err := buy("a")
	if gate.Calls("Deduct") > deducts && running.Load() > 0 {
		t.Fatalf("an order of a (err %v) reached the gate while %d recalibration(s) of a were still running (Recalibrate called %d times)",
			err, running.Load(), calls.Load())
	}
}

// The same when the operator switches ForceFallback on and off while a
// recalibration runs (SetMode: "Leaving ForceFallback makes every breaker
// recalibrate and ramp back as after an outage"): the breaker's next
// recalibration must not send traffic back while the earlier one, given
// up, still runs.
func TestNoTrafficToTheGateWhileAGivenUpRecalibrationRuns(t *testing.T) {
	for _, perSKU := range []int{0, 1} {
		t.Run(fmt.Sprint("PerSKU=", perSKU), func(t *testing.T) {
			clock := stocktest.NewClock(stocktest.Epoch)
			gate := stocktest.NewFaulty(memstock.New(clock))
			record := stocktest.NewFaulty(memstock.New(clock))
			flow := tiered.New(gate, record, tiered.Config{Clock: clock})
			var running, calls atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			d := mustNew(t, flow, nil, degrade.Config{
				PerSKU: perSKU, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute, RampSteps: []float64{},
				Recalibrate: func(ctx context.Context, key string) error {
					running.Add(1)
					defer running.Add(-1)
					if calls.Add(1) == 1 {
						close(started)
						<-release
					}
					return nil
				},
			})
			defer close(release)
			ctx := t.Context()
			if err := d.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
				t.Fatal(err)
			}
			n := 0
			buy := func() error {
				n++
				return d.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", n), Items: []stock.Item{{SKU: "a", Qty: 1}}})
			}
			gate.SetFault(stocktest.Down)
			for i := 0; d.State("a") != degrade.Degraded; i++ {
				if i > 10 {
					t.Fatal("the breaker of a never opened")
				}
				_ = buy()
			}
			gate.SetFault(stocktest.Healthy)
			clock.Advance(time.Minute)
			_ = buy() // starts the first recalibration
			<-started
			d.SetMode(degrade.ForceFallback)
			if err := buy(); err != nil { // at the record alone
				t.Fatalf("order in ForceFallback mode: %v", err)
			}
			d.SetMode(degrade.Auto)
			for i := 0; i < 1000 && d.State("a") != degrade.Primary; i++ {
				_ = buy() // the next recalibration, then traffic back
				runtime.Gosched()
			}
			deducts := gate.Calls("Deduct")
			err := buy()
			if gate.Calls("Deduct") > deducts && running.Load() > 0 {
				t.Fatalf("an order of a (err %v) reached the gate while %d recalibration(s) of a were still running (Recalibrate called %d times)",
					err, running.Load(), calls.Load())
			}
		})
	}
}
