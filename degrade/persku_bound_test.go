package degrade

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Config.PerSKU "is how many closed ones no call is using are kept:
// least recently used ones beyond it are forgotten, with the failures
// they counted"; "the breakers kept are at most PerSKU, plus those of the
// SKUs touched during an outage ... plus those of the calls running".
// Here there is no outage: the primary answers every order but one
// transient failure on each of 50 long-tail SKUs (no breaker ever opens,
// all are closed, no call runs), and a hot SKU keeps selling. The set
// must stay within PerSKU.
func TestPerSKUKeepsNoMoreClosedBreakersWithFailuresCounted(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	primary := stocktest.NewFaulty(memstock.New(clock))
	fallback := stocktest.NewFaulty(memstock.New(clock))
	d, err := New(primary, fallback, Config{PerSKU: 2, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx := t.Context()
	const n = 50
	sale := func(sku string) {
		for _, m := range []stock.Manager{primary.Manager, fallback.Manager} {
			if err := m.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 1000}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sale("hot")
	for i := range n {
		sku := fmt.Sprint("tail", i)
		sale(sku)
		primary.SetFaultFor(stocktest.Down, stocktest.OnSKU(sku))
		if err := d.Deduct(ctx, stock.Order{ID: "t" + sku, Items: []stock.Item{{SKU: sku, Qty: 1}}}); err == nil {
			t.Fatalf("order of %s with the primary down for it: taken", sku)
		}
		primary.SetFault(stocktest.Healthy)
		for j := range 3 {
			if err := d.Deduct(ctx, stock.Order{ID: fmt.Sprint("h", i, "-", j), Items: []stock.Item{{SKU: "hot", Qty: 1}}}); err != nil {
				t.Fatalf("hot order: %v", err)
			}
		}
	}
	for i := range n {
		if st := d.State(fmt.Sprint("tail", i)); st != Primary {
			t.Fatalf("tail%d: %v, want primary (no breaker opened)", i, st)
		}
	}
	_ = d.State("hot")
	_ = d.State("hot2")
	d.set.mu.Lock()
	kept := len(d.set.m)
	d.set.mu.Unlock()
	if kept > 2 {
		t.Fatalf("per-SKU breakers kept with PerSKU 2, no outage, every breaker closed and no call running: %d, want at most 2", kept)
	}
}

// Config.Interval "clears a closed breaker's counts periodically", and
// PerSKU keeps at most that many closed breakers no call is using,
// whatever they counted. Once the Interval has passed since each SKU's
// one failure, those breakers count no failure either: closed, unused,
// they are beyond PerSKU and must be forgotten. gobreaker runs its
// Interval on the wall clock and has no clock to inject: each breaker's
// counts expire at most 1ms after its failure, and the sleep only ever
// lasts longer than asked, so the wait is always enough.
func TestPerSKUKeepsNoMoreClosedBreakersWhoseFailuresTheIntervalCleared(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	primary := stocktest.NewFaulty(memstock.New(clock))
	fallback := stocktest.NewFaulty(memstock.New(clock))
	d, err := New(primary, fallback, Config{PerSKU: 2, Clock: clock, FallbackLimit: rate.Inf, OpenFor: time.Minute,
		Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx := t.Context()
	const n = 10
	for i := range n {
		sku := fmt.Sprint("tail", i)
		for _, m := range []stock.Manager{primary.Manager, fallback.Manager} {
			if err := m.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 1000}); err != nil {
				t.Fatal(err)
			}
		}
		primary.SetFaultFor(stocktest.Down, stocktest.OnSKU(sku))
		if err := d.Deduct(ctx, stock.Order{ID: "t" + sku, Items: []stock.Item{{SKU: sku, Qty: 1}}}); err == nil {
			t.Fatalf("order of %s with the primary down for it: taken", sku)
		}
		primary.SetFault(stocktest.Healthy)
	}
	time.Sleep(20 * time.Millisecond) // gobreaker's Interval runs on the wall clock: 20 Intervals later
	for i := range n {
		if st := d.State(fmt.Sprint("tail", i)); st != Primary {
			t.Fatalf("tail%d: %v, want primary", i, st)
		}
	}
	d.set.mu.Lock()
	kept := len(d.set.m)
	d.set.mu.Unlock()
	if kept > 2 {
		t.Fatalf("per-SKU breakers kept with PerSKU 2, each closed, unused, its one failure older than Interval: %d, want at most 2", kept)
	}
}
