package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A recalibration waits for the fallback's Deducts already running
// (package doc: "Switching back: after Config.OpenFor, Config.Recalibrate
// runs in the background, once the fallback's Deducts of this node that
// were running have ended"; Place: "A recalibration waits for the
// fallback's Deducts already running"), also when more SKUs than PerSKU
// are used while the write runs: the recalibration of the SKU must not
// read the record before the order lands.
func TestRecalibrationOfAForgottenBreakerWaitsForItsFallbackWrite(t *testing.T) {
	recalibrationAfterFallbackWrites(t, 1)
}

// The same with many fallback writes of the SKU running at once when SKUs
// past PerSKU are used: the recalibration reads after every one of them,
// and so reads exactly as many held as orders were taken.
func TestRecalibrationOfAForgottenBreakerWaitsForEveryFallbackWrite(t *testing.T) {
	recalibrationAfterFallbackWrites(t, 8)
}

// recalibrationAfterFallbackWrites opens a's breaker (PerSKU 1), starts
// writers fallback Deducts of a that stop before the record's write, uses
// b's breaker (past PerSKU), lets OpenFor pass and checks that a's
// recalibration reads the record only after every write landed.
func recalibrationAfterFallbackWrites(t *testing.T, writers int) {
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := stocktest.NewFaulty(memstock.New(clock))
	flow := tiered.New(gate, record, tiered.Config{Clock: clock})
	seen := make(chan int64, 4)
	d := mustNew(t, flow, nil, degrade.Config{
		PerSKU: 1, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute, RampSteps: []float64{},
		Recalibrate: func(ctx context.Context, key string) error {
			if key != "a" {
				return nil
			}
			lv, err := record.Manager.Levels(ctx, "a")
			if err != nil {
				return err
			}
			seen <- lv.Held
			return gate.Manager.PutOnSale(ctx, stock.Listing{SKU: "a", Units: lv.Available, HoldTTL: flow.GateHold(lv.HoldTTL)})
		},
	})
	ctx := t.Context()
	for _, sku := range []string{"a", "b"} {
		if err := d.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100}); err != nil {
			t.Fatal(err)
		}
	}
	buy := func(id, sku string) error {
		return d.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: 1}}})
	}
	gate.SetFault(stocktest.Down)
	for i := 0; d.State("a") != degrade.Degraded; i++ {
		if i > 10 {
			t.Fatal("the breaker of a never opened")
		}
		_ = buy(fmt.Sprint("trip", i), "a")
	}
	gate.SetFault(stocktest.Healthy)
	// Slow fallback Deducts of a: each stops before the record's write
	// until let go.
	entered, release := make(chan struct{}, writers), make(chan struct{})
	record.SetBefore(func(c stocktest.Call) {
		if c.Method == "Deduct" && slices.Contains(c.SKUs, "a") {
			entered <- struct{}{}
			<-release
		}
	})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := buy(fmt.Sprint("slow", i), "a"); err != nil {
				t.Errorf("slow fallback Deduct %d: %v", i, err)
			}
		}()
	}
	for range writers {
		<-entered
	}
	// b's breaker: past PerSKU (a's is open, writes running under it).
	if _, err := d.Available(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := buy("starts-recalibration", "a"); !errors.Is(err, degrade.ErrBusy) {
		t.Errorf("the Deduct that starts the recalibration: %v, want ErrBusy", err)
	}
	select {
	case held := <-seen:
		close(release)
		wg.Wait()
		t.Fatalf("the recalibration of a read the record (%d held) while %d fallback writes of a were running", held, writers)
	case <-time.After(time.Second): // a recalibration that waits reads nothing before the writes land
	}
	close(release)
	wg.Wait()
	record.SetBefore(nil)
	if held := <-seen; held != int64(writers) {
		t.Fatalf("the recalibration read %d held at the record, want %d", held, writers)
	}
}
