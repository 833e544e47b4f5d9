package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A hot SKU sells out, unpaid holds expire at the gate and are sold again.
// The record received each order a little after the gate held it (the
// hand-off delay), so its copy of an unpaid hold would expire a little after
// the gate's: the resale must still be recorded, never refused as sold out
// while the record has the unit. Buyers, consumers, payers and reclaimers
// (two nodes) run concurrently; the counts are exact.
func TestResaleAfterGateReclaimIsRecorded(t *testing.T) {
	const (
		units   = 20
		buyers  = 40
		rounds  = 6
		hold    = time.Minute
		handoff = 5 * time.Second // queue delay between gate and record
	)
	ctx := t.Context()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := memstock.New(clock), memstock.New(clock)
	var (
		qmu   sync.Mutex
		queue []stock.Order
	)
	recorder := tiered.RecorderFunc(func(_ context.Context, o stock.Order) error {
		qmu.Lock()
		queue = append(queue, o)
		qmu.Unlock()
		return nil
	})
	// Two application nodes share the tiers.
	nodes := []*tiered.Manager{
		tiered.New(gate, record, tiered.Config{Recorder: recorder, Clock: clock}),
		tiered.New(gate, record, tiered.Config{Recorder: recorder, Clock: clock}),
	}
	if err := nodes[0].PutOnSale(ctx, stock.Listing{SKU: "hot", Units: units, HoldTTL: hold}); err != nil {
		t.Fatal(err)
	}

	var paid, refused, reclaimed, placed atomic.Int64
	n := 0
	for round := range rounds {
		before, err := gate.Available(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		var admitted atomic.Int64
		parallel(buyers, func(i int) {
			o := stock.Order{ID: fmt.Sprintf("r%d-b%d", round, i), UserID: fmt.Sprint("u", n+i),
				Items: []stock.Item{{SKU: "hot", Qty: 1}}}
			switch _, err := nodes[i%2].Place(ctx, o); {
			case err == nil:
				admitted.Add(1)
			case !errors.Is(err, stock.ErrSoldOut):
				t.Errorf("Place %s: %v", o.ID, err)
			}
		})
		n += buyers
		placed.Add(admitted.Load())
		if got, want := admitted.Load(), min(before, buyers); got != want {
			t.Fatalf("round %d: the gate admitted %d orders with %d units available, want %d", round, got, before, want)
		}

		clock.Advance(handoff)
		qmu.Lock()
		batch := queue
		queue = nil
		qmu.Unlock()
		var settled sync.Map
		parallel(len(batch), func(i int) {
			o := batch[i]
			switch err := nodes[i%2].Settle(ctx, o); {
			case err == nil:
				settled.Store(o.ID, i)
			case errors.Is(err, stock.ErrSoldOut):
				refused.Add(1) // admitted by the gate, refused by the record
			default:
				t.Errorf("Settle %s: %v", o.ID, err)
			}
		})
		// Every other recorded order is paid, within its hold.
		var payers []string
		settled.Range(func(id, i any) bool {
			if i.(int)%2 == 0 {
				payers = append(payers, id.(string))
			}
			return true
		})
		parallel(len(payers), func(i int) {
			if err := nodes[i%2].Confirm(ctx, payers[i]); err != nil {
				t.Errorf("Confirm %s: %v", payers[i], err)
				return
			}
			paid.Add(1)
		})

		// Past the gate's deadline, not past the record's had it started
		// its hold time at the hand-off: both nodes reclaim.
		clock.Advance(hold - handoff + time.Second)
		parallel(2, func(i int) {
			for {
				got, err := nodes[i].ReclaimExpired(ctx, 4)
				if err != nil {
					t.Errorf("ReclaimExpired: %v", err)
					return
				}
				reclaimed.Add(int64(len(got)))
				if len(got) < 4 {
					return
				}
			}
		})
	}
	if r := refused.Load(); r != 0 {
		t.Errorf("the record refused %d orders the gate had resold, with the units still on sale", r)
	}
	sold := paid.Load()
	if sold != units { // every round pays half of what it recorded, so all units end up sold
		t.Errorf("paid %d orders, want %d: resold units were not sold", sold, units)
	}
	for _, tier := range []struct {
		name string
		m    stock.Manager
	}{{"gate", gate}, {"record", record}} {
		lv, err := tier.m.Levels(ctx, "hot")
		if err != nil {
			t.Fatal(err)
		}
		if lv.Available != units-sold || lv.Held != 0 || lv.Sold != sold {
			t.Errorf("%s: available/held/sold = %d/%d/%d, want %d/0/%d", tier.name, lv.Available, lv.Held, lv.Sold, units-sold, sold)
		}
	}
	// Every admitted order was either paid or reclaimed, once.
	if got, want := reclaimed.Load(), placed.Load()-sold; got != want {
		t.Errorf("reclaimers reported %d lines, want %d (admitted %d, paid %d)", got, want, placed.Load(), sold)
	}
}

// parallel runs f(0) to f(n-1) at once and waits for all of them.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}
