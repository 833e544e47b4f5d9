package handofftest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// FaultSale is one run of a fault cell for a broker adapter: a sale of
// single-unit orders on a tiered flow over memstock tiers, handed off
// through the broker, with a fault the cell injects (a broker down from
// Down to Up, a Source that drops its connection before an Ack, a Publisher
// that publishes twice, ...). The tiers, the Recorder and the Consumers
// read one clock that moves only when the sale says (holds expire when
// it advances, never by a slow machine). The adapters' own fault tests
// run it; so can a user's adapter.
type FaultSale struct {
	// Units are put on sale; Orders are placed, one unit each, by
	// buyers while Consumers settle them.
	Units, Orders, Consumers int
	// Hold is the listing's hold time.
	Hold time.Duration
	// Publisher is the broker's publisher, as the cell wraps it.
	Publisher handoff.Publisher
	// NewSource returns a Source for consumer i.
	NewSource func(i int) handoff.Source
	// Down, if set, runs once half the orders were placed, before the
	// next order is handed to a buyer, so the orders after it meet the
	// fault it injects; Up runs Outage later, while buyers keep buying
	// and consumers settling.
	Down, Up func()
	// Outage is how long the fault lasts, from Down's return to Up.
	Outage time.Duration
	// Late, if set, holds back the consumers until every order was
	// placed, then advances the clock by Late before they start.
	Late time.Duration
	// SettleFor is how long consumers keep running after every order
	// placed has ended, for messages of orders whose Place failed but
	// whose publish reached the broker after all.
	SettleFor time.Duration
}

// FaultOutcome is what a FaultSale ended with, per order ID.
type FaultOutcome struct {
	// Placed, Refused and Unknown are the orders the flow answered nil,
	// a business error, or an unknown outcome to the last time.
	Placed, Refused, Unknown map[string]bool
	// Done are Consumer.Done's answers, per message.
	Done map[string][]error
}

// Run runs the sale and checks the invariants every cell promises:
// nothing oversold; every order a buyer was told was placed is recorded,
// or returned as expired in the queue (no lost ack); no order recorded
// twice; and, after every recorded order is confirmed and the clock passes
// every hold, nothing held at either tier (no leak), with the gate and the
// record agreeing on what was sold (drift 0).
func (s FaultSale) Run(t *testing.T) FaultOutcome {
	t.Helper()
	const sku = "fault"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clock := stocktest.NewClock(time.Now())
	gate, record := memstock.New(clock), memstock.New(clock)
	rec := handoff.NewRecorder(s.Publisher, gate, handoff.RecorderConfig{Clock: clock})
	flow := tiered.New(gate, record, tiered.Config{Recorder: rec, Clock: clock})
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: sku, Units: int64(s.Units), HoldTTL: s.Hold}); err != nil {
		t.Fatalf("PutOnSale: %v", err)
	}
	out := FaultOutcome{Placed: map[string]bool{}, Refused: map[string]bool{}, Unknown: map[string]bool{}, Done: map[string][]error{}}
	var mu sync.Mutex

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var running sync.WaitGroup
	startConsumers := func() {
		for i := range s.Consumers {
			c, err := handoff.NewConsumer(s.NewSource(i), flow, handoff.ConsumerConfig{
				Batch: 16, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
				Poll: 200 * time.Millisecond, Clock: clock,
				Done: func(_ context.Context, m handoff.Message, err error) {
					mu.Lock()
					out.Done[m.Order.ID] = append(out.Done[m.Order.ID], err)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatalf("NewConsumer: %v", err)
			}
			running.Go(func() { _ = c.Run(runCtx) })
		}
	}
	if s.Late == 0 {
		startConsumers()
	}

	// Buyers: each order is placed until the flow answers it (a buyer's
	// client retries an unknown outcome with the same order ID), at most
	// 40 times.
	var buying sync.WaitGroup
	var mid sync.WaitGroup // Up runs beside the buyers, who keep buying
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range s.Orders {
			if i == s.Orders/2 && s.Down != nil {
				s.Down()
				mid.Go(func() {
					time.Sleep(s.Outage)
					if s.Up != nil {
						s.Up()
					}
				})
			}
			next <- i
		}
	}()
	for range 4 {
		buying.Go(func() {
			for i := range next {
				o := stock.Order{ID: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i), Items: []stock.Item{{SKU: sku, Qty: 1}}}
				var err error
				for range 40 {
					pctx, pcancel := context.WithTimeout(ctx, time.Second)
					_, err = flow.Place(pctx, o)
					pcancel()
					if err == nil || stock.IsBusiness(err) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				mu.Lock()
				switch {
				case err == nil:
					out.Placed[o.ID] = true
				case stock.IsBusiness(err):
					out.Refused[o.ID] = true
				default:
					out.Unknown[o.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	buying.Wait()
	mid.Wait()
	if s.Late > 0 {
		clock.Advance(s.Late)
		startConsumers()
	}

	// Every placed order ends (recorded, or expired in the queue), then
	// the consumers run settleFor more. The record tells: a delivery
	// whose Settle recorded the order may end without Done (its ack
	// reached the broker and the reply did not, so the message is gone
	// and no consumer is told it was acknowledged).
	ended := func() bool {
		mu.Lock()
		var open []string
		for id := range out.Placed {
			if len(out.Done[id]) == 0 {
				open = append(open, id)
			}
		}
		mu.Unlock()
		if len(open) == 0 {
			return true
		}
		infos, err := record.Orders(ctx, open)
		if err != nil {
			return false
		}
		n := 0
		for _, in := range infos {
			if in.State.Takes() {
				n++
			}
		}
		return n == len(open)
	}
	settleBy := time.Now().Add(30 * time.Second) // a busy machine's margin
	for !ended() {
		if time.Now().After(settleBy) {
			mu.Lock()
			var lost []string
			for id := range out.Placed {
				if len(out.Done[id]) == 0 {
					lost = append(lost, id)
				}
			}
			mu.Unlock()
			infos, _ := record.Orders(ctx, lost)
			taken := map[string]bool{}
			for _, in := range infos {
				taken[in.ID] = in.State.Takes()
			}
			lost = slices.DeleteFunc(lost, func(id string) bool { return taken[id] })
			t.Fatalf("%d orders placed and not settled 30s after the sale (lost acks): %v", len(lost), lost)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(s.SettleFor)
	stop()
	running.Wait()

	ids := make([]string, 0, s.Orders)
	for i := range s.Orders {
		ids = append(ids, fmt.Sprintf("o%d", i))
	}
	infos, err := record.Orders(ctx, ids)
	if err != nil {
		t.Fatalf("record Orders: %v", err)
	}
	atRecord := map[string]stock.State{}
	for _, in := range infos {
		atRecord[in.ID] = in.State
	}
	for id := range out.Placed {
		errs := out.Done[id]
		recorded := atRecord[id] == stock.StateHeld
		expired := len(errs) > 0 && errors.Is(errs[len(errs)-1], stock.ErrHoldExpired) && !atRecord[id].Takes()
		if !recorded && !expired {
			t.Errorf("order %s was placed and ended %v, %v at the record: neither recorded nor returned as expired (a lost ack)", id, errs, atRecord[id])
		}
	}
	held := 0
	for _, st := range atRecord {
		if st == stock.StateHeld {
			held++
		}
	}
	levels := func(name string, m stock.Manager) stock.Levels {
		lv, err := m.Levels(ctx, sku)
		if err != nil {
			t.Fatalf("%s Levels: %v", name, err)
		}
		return lv
	}
	rl := levels("record", record)
	if rl.Held != int64(held) || rl.Held+rl.Sold > int64(s.Units) {
		t.Errorf("record holds %d units for %d orders held there (each order once), sold %d of %d", rl.Held, held, rl.Sold, s.Units)
	}
	if gl := levels("gate", gate); gl.Held+gl.Sold > int64(s.Units) || gl.Available < 0 {
		t.Errorf("gate oversold: held %d sold %d available %d of %d", gl.Held, gl.Sold, gl.Available, s.Units)
	}
	// The buyers pay for what the record holds; every other hold ends.
	confirmed := 0
	for id, st := range atRecord {
		if st == stock.StateHeld {
			if err := flow.Confirm(ctx, id); err != nil {
				t.Errorf("Confirm %s: %v", id, err)
				continue
			}
			confirmed++
		}
	}
	clock.Advance(3*s.Hold + s.Late)
	for {
		got, err := flow.ReclaimExpired(ctx, 256)
		if err != nil {
			t.Fatalf("ReclaimExpired: %v", err)
		}
		if len(got) == 0 {
			break
		}
	}
	gl, rl := levels("gate", gate), levels("record", record)
	want := stock.Levels{Available: int64(s.Units - confirmed), Sold: int64(confirmed)}
	for _, tier := range []struct {
		name string
		lv   stock.Levels
	}{{"gate", gl}, {"record", rl}} {
		if tier.lv.Available != want.Available || tier.lv.Held != 0 || tier.lv.Sold != want.Sold {
			t.Errorf("%s after the sale: available %d held %d sold %d; want %d, 0, %d (no leak, no drift)",
				tier.name, tier.lv.Available, tier.lv.Held, tier.lv.Sold, want.Available, want.Sold)
		}
	}
	t.Logf("placed %d, refused %d, unknown %d; recorded and sold %d of %d units", len(out.Placed), len(out.Refused), len(out.Unknown), confirmed, s.Units)
	return out
}
