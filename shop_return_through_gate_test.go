package stockguard_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// returnShop is a shop whose gate and record are stocktest.Faulty, with
// SKUs a and b on sale (10 units each, a 15-minute hold). bound checks the
// gate bound of both SKUs (the gate never offers more than the record
// has); even checks that they agree, as they do after a repair with no
// hold live.
type returnShop struct {
	*stockguard.Shop
	t            *testing.T
	mr           *miniredis.Miniredis
	gate, record *stocktest.Faulty
	clock        *stocktest.Clock
	// recalibrated receives the breaker's moves out of recalibrating,
	// made once the recalibration's pass has returned.
	recalibrated chan observe.Breaker
}

func newReturnShop(t *testing.T) *returnShop {
	t.Helper()
	s := &returnShop{t: t, recalibrated: make(chan observe.Breaker, 16)}
	s.Shop, s.mr, s.clock = shopOn(t, stockguard.Config{
		Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			s.gate, s.record = stocktest.NewFaulty(g), stocktest.NewFaulty(r)
			return s.gate, s.record
		},
		Observer: observe.Observer{Breaker: func(b observe.Breaker) {
			if b.From == degrade.Recalibrating.String() {
				select {
				case s.recalibrated <- b:
				default: // a test that does not wait for it
				}
			}
		}},
	})
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(t.Context(), stock.Listing{SKU: sku, Units: 10, HoldTTL: 15 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// awaitRecalibration waits until the breaker, which a call through it
// set recalibrating the gate in the background, has finished (its pass
// returned, its corrections made) and lets traffic back to the gate.
func (s *returnShop) awaitRecalibration() {
	s.t.Helper()
	select {
	case b := <-s.recalibrated:
		if b.Err != nil || (b.To != degrade.Ramping.String() && b.To != degrade.Primary.String()) {
			s.t.Fatalf("the breaker's recalibration ended %s (%v), want traffic let back to the gate", b.To, b.Err)
		}
	case <-time.After(time.Minute):
		s.t.Fatal("the breaker's recalibration did not end within a minute")
	}
}

// available returns sku's available units at the gate and at the record.
func (s *returnShop) available(sku string) (gate, record int64) {
	s.t.Helper()
	g, err := s.Gate().Available(context.Background(), sku)
	if err != nil {
		s.t.Fatal(err)
	}
	r, err := s.Record().Available(context.Background(), sku)
	if err != nil {
		s.t.Fatal(err)
	}
	return g, r
}

func (s *returnShop) bound(when string) {
	s.t.Helper()
	for _, sku := range []string{"a", "b"} {
		if g, r := s.available(sku); g > r {
			s.t.Fatalf("%s: SKU %s: gate %d available, record %d: the gate sells %d units the record does not have", when, sku, g, r, g-r)
		}
	}
}

// even repairs every SKU and checks that each tier then has want[sku].
func (s *returnShop) even(when string, want map[string]int64) {
	s.t.Helper()
	if _, err := s.Reconciler().RepairAll(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	for sku, w := range want {
		if g, r := s.available(sku); g != w || r != w {
			s.t.Fatalf("%s, after a repair: SKU %s: gate %d, record %d available, want %d", when, sku, g, r, w)
		}
	}
}

// evict deletes sku's state hash from the gate's Redis, as an eviction or
// a Cluster master that lost its data would: the gate answers
// stock.ErrUnavailable for the SKU until a repair rebuilds it.
func (s *returnShop) evict(sku string) {
	s.t.Helper()
	for _, k := range s.mr.Keys() {
		if strings.HasSuffix(k, "{"+sku+"}:state") && s.mr.Del(k) {
			return
		}
	}
	s.t.Fatalf("no state hash of %s among %v", sku, s.mr.Keys())
}

// sell places and confirms order id of qty units of each of skus.
func (s *returnShop) sell(id string, qty int64, skus ...string) {
	s.t.Helper()
	s.hold(id, qty, skus...)
	if err := s.Confirm(s.t.Context(), id); err != nil {
		s.t.Fatal(err)
	}
}

// hold places order id of qty units of each of skus.
func (s *returnShop) hold(id string, qty int64, skus ...string) {
	s.t.Helper()
	o := stock.Order{ID: id}
	for _, sku := range skus {
		o.Items = append(o.Items, stock.Item{SKU: sku, Qty: qty})
	}
	if err := s.Deduct(s.t.Context(), o); err != nil {
		s.t.Fatal(err)
	}
}

// retake repeats o's Deduct and Confirm through the flow: a client's late
// retries of lost replies reaching a node whose breaker lets traffic
// through, which make a gate that does not know o take it again as a sale.
func (s *returnShop) retake(o stock.Order) {
	s.t.Helper()
	if err := s.Flow().Deduct(s.t.Context(), o); err != nil {
		s.t.Fatalf("repeat Deduct: %v", err)
	}
	if err := s.Flow().Confirm(s.t.Context(), o.ID); err != nil {
		s.t.Fatalf("repeat Confirm: %v", err)
	}
}

// refundAll refunds sale id through the flow, then checks the gate bound,
// and that a repair leaves every unit of a back.
func (s *returnShop) refundAll(id string) {
	s.t.Helper()
	if err := s.Flow().Revert(s.t.Context(), id); err != nil {
		s.t.Fatalf("refund of %s: %v", id, err)
	}
	s.bound("after the refund of " + id)
	s.even("after the refund of "+id, map[string]int64{"a": 10})
}

// inDoubtAtFallback leaves o in doubt at the primary (the gate took its
// hold, the record's Deduct failed) and has its retry settled at the
// record path, the operator forcing traffic to the fallback (the mode is
// left so).
func (s *returnShop) inDoubtAtFallback(o stock.Order) {
	s.t.Helper()
	s.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Deduct"))
	if err := s.Deduct(s.t.Context(), o); err == nil {
		s.t.Fatal("Deduct with the record's Deduct down: nil, want an unknown outcome")
	}
	s.record.SetFault(stocktest.Healthy)
	s.SetMode(degrade.ForceFallback)
	if err := s.Deduct(s.t.Context(), o); err != nil {
		s.t.Fatalf("retry of the Deduct in doubt, forced to the fallback: %v", err)
	}
}

// raceAtGate runs race, then a repair, once, just before the gate's
// method call for o1, and returns a check that they ran.
func (s *returnShop) raceAtGate(method string, race func()) (ran func()) {
	raced := false
	s.gate.SetBefore(func(c stocktest.Call) {
		if raced || c.Method != method || c.OrderID != "o1" {
			return
		}
		raced = true
		race()
		if _, err := s.Reconciler().RepairAll(s.t.Context()); err != nil {
			s.t.Errorf("repair: %v", err)
		}
	})
	return func() {
		s.t.Helper()
		s.gate.SetBefore(nil)
		if !raced {
			s.t.Fatalf("the gate was never asked %s of o1", method)
		}
	}
}

// A refund of a sale goes through the gate: while the gate has lost one of
// the order's SKUs it answers stock.ErrUnavailable with nothing given back
// at either tier; once a repair rebuilt the SKU, it and its repeats give
// the units back once.
func TestShopRefundOfASaleWaitsForAGateThatLostItsSKU(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.sell("o1", 1, "a", "b")
	s.evict("b")
	if err := s.Revert(ctx, "o1"); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("refund through a gate that lost b: %v, want ErrUnavailable", err)
	}
	if _, r := s.available("a"); r != 9 {
		t.Fatalf("record a: %d available after the refund that waits, want 9 (nothing given back)", r)
	}
	s.even("after the refund that waits", map[string]int64{"a": 9, "b": 9})
	for i := range 2 {
		if err := s.Revert(ctx, "o1"); err != nil {
			t.Fatalf("refund %d after the repair: %v", i+1, err)
		}
		s.bound("after the refund")
	}
	s.even("after the refund and its repeat", map[string]int64{"a": 10, "b": 10})
}

// A partial return of a sale goes through the gate too: while the gate has
// lost one of the order's SKUs it answers stock.ErrUnavailable with
// nothing given back; once the SKU is rebuilt it and its repeats give the
// units back once, and a refund of the rest gives back only the rest.
func TestShopPartialReturnWaitsForAGateThatLostItsSKU(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.sell("o1", 2, "a", "b")
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 1}}}
	s.evict("b")
	if err := s.RevertItems(ctx, r1); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("partial return through a gate that lost b: %v, want ErrUnavailable", err)
	}
	s.even("after the return that waits", map[string]int64{"a": 8, "b": 8})
	for i := range 2 {
		if err := s.RevertItems(ctx, r1); err != nil {
			t.Fatalf("return %d after the repair: %v", i+1, err)
		}
		s.bound("after the return")
	}
	s.even("after the return and its repeat", map[string]int64{"a": 9, "b": 9})
	if err := s.Revert(ctx, "o1"); err != nil {
		t.Fatalf("refund of the rest: %v", err)
	}
	s.bound("after the refund of the rest")
	s.even("after the refund of the rest", map[string]int64{"a": 10, "b": 10})
}

// While the breaker keeps traffic off the gate (here the operator's
// ForceFallback), a refund of a sale waits for the gate (stock.ErrUnavailable,
// nothing written), and a cancel of a hold is made at the record alone;
// once traffic returns to the gate the refund gives the units back once.
func TestShopRefundWhileTheBreakerIsOpenWaitsForTheGate(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.sell("paid", 2, "a")
	s.hold("held", 3, "a")
	s.SetMode(degrade.ForceFallback)
	if err := s.Revert(ctx, "paid"); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("refund of a sale while forced to the fallback: %v, want ErrUnavailable", err)
	}
	if err := s.Revert(ctx, "held"); err != nil {
		t.Fatalf("cancel of a hold while forced to the fallback: %v", err)
	}
	if _, r := s.available("a"); r != 8 {
		t.Fatalf("record a: %d available, want 8 (the hold's 3 back, the sale's 2 still sold)", r)
	}
	s.bound("after the refund that waits and the cancel")
	s.SetMode(degrade.Auto)
	// Once the breaker sends calls through the flow again.
	if err := s.Flow().Revert(ctx, "paid"); err != nil {
		t.Fatalf("refund through the flow: %v", err)
	}
	s.bound("after the refund")
	// The gate holds the cancelled hold's units until its deadline.
	s.clock.Advance(16 * time.Minute)
	if _, err := s.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	s.bound("after the reclaim")
	s.even("after the reclaim", map[string]int64{"a": 10})
}

// A refund through the flow races the same refund on a node whose breaker
// is open, and a repair, all between the flow's read of the record and its
// refund at the gate: the refund at the record alone waits for the gate,
// so the units come back once.
func TestShopRefundRacingItsRetryOnANodeWithTheBreakerOpenReturnsOnce(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.sell("o1", 3, "a")
	ran := s.raceAtGate("Revert", func() {
		if err := s.Flow().Fallback().Revert(ctx, "o1"); !errors.Is(err, tiered.ErrWaitsForGate) {
			t.Errorf("the refund at the record alone: %v, want tiered.ErrWaitsForGate", err)
		}
	})
	s.refundAll("o1")
	ran()
}

// A hold cancelled at the record alone (the breaker open) and then paid
// through the gate (a late Confirm) is a sale at the gate of units the
// record got back, which reconciliation counts into the gate: the late
// Confirm is answered stock.ErrOrderClosed, and neither a partial return
// nor a refund of the order gives anything back at the gate.
func TestShopReturnsOfAHoldCancelledAtTheRecordAloneGiveNothingBackTwice(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.hold("o1", 3, "a")
	if err := s.Flow().Fallback().Revert(ctx, "o1"); err != nil {
		t.Fatalf("cancel at the record alone: %v", err)
	}
	s.bound("after the cancel")
	if err := s.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("late Confirm of the cancelled hold: %v, want ErrOrderClosed", err)
	}
	s.bound("after the late Confirm")
	s.even("after the late Confirm", map[string]int64{"a": 10})
	if err := s.RevertItems(ctx, stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("partial return of the cancelled order: %v, want ErrOrderClosed", err)
	}
	s.bound("after the partial return")
	if err := s.Revert(ctx, "o1"); err != nil {
		t.Fatalf("refund of the cancelled order: %v", err)
	}
	s.bound("after the refund")
	s.even("after the returns", map[string]int64{"a": 10})
}

// A hold paid at the record alone (the breaker open) whose gate hold then
// passed its deadline is a sale: a partial return of it is given back at
// the record, as a refund is, not refused as an expired hold.
func TestShopPartialReturnOfAnOrderPaidAtTheRecordAloneIsApplied(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.hold("o1", 3, "a")
	if err := s.Flow().Fallback().Confirm(ctx, "o1"); err != nil {
		t.Fatalf("confirm at the record alone: %v", err)
	}
	if _, err := s.Reconciler().RepairAll(ctx); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(16 * time.Minute)
	if _, err := s.ReclaimExpired(ctx, 10); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	s.bound("after the reclaim")
	infos, err := s.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State != stock.StateConfirmed {
		t.Fatalf("o1 after the reclaim: %v, want confirmed (paid)", infos[0].State)
	}
	if err := s.RevertItems(ctx, stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatalf("partial return of the paid order: %v", err)
	}
	if _, r := s.available("a"); r != 8 {
		t.Fatalf("record a after the partial return: %d available, want 8", r)
	}
	s.bound("after the partial return")
	s.even("after the partial return", map[string]int64{"a": 8})
}

// A paid order whose Confirm reached the gate and not the record, partly
// returned after the gate's deadline (within the record's), is a sale with
// that return applied: the return is not refused as an expired hold.
func TestShopPartialReturnOfAPaidOrderHalfConfirmedIsApplied(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.hold("o1", 3, "a")
	s.record.SetFaultFor(stocktest.Down, stocktest.OnMethod("Confirm"))
	if err := s.Confirm(ctx, "o1"); err == nil {
		t.Fatal("confirm with the record's Confirm down: nil, want a *TierError")
	}
	s.record.SetFault(stocktest.Healthy)
	s.clock.Advance(16 * time.Minute) // past the gate's 15-minute hold, within the record's
	if err := s.RevertItems(ctx, stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatalf("partial return of the paid order: %v", err)
	}
	if err := s.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("the Confirm's retry: %v", err)
	}
	infos, err := s.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State != stock.StateConfirmed || len(infos[0].Returned) != 1 || infos[0].Returned[0].Qty != 1 {
		t.Fatalf("o1: %+v, want confirmed with 1 unit of a returned", infos[0])
	}
	s.bound("after the return and the Confirm")
	s.even("after the return and the Confirm", map[string]int64{"a": 8})
}

// A sale the fallback took while traffic was kept off the gate (the gate
// never had it) is refunded once traffic returns to the gate, on the node
// that remembers the fallback took it too: the record path leaves the
// refund to the flow, which finds the gate does not know the order and
// refunds it at the record alone.
func TestShopRefundOfASaleTheFallbackTookGoesThroughOnceTrafficIsBack(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.SetMode(degrade.ForceFallback)
	s.sell("fb", 2, "a")
	s.SetMode(degrade.Auto)
	s.even("after the sale at the fallback", map[string]int64{"a": 8})
	for i := range 3 {
		err := s.Revert(ctx, "fb")
		if err == nil {
			break
		}
		if i == 2 {
			t.Fatalf("refund of a sale the fallback took, traffic back on the gate, attempt %d: %v; want nil (the gate never had the order, nothing can ever let this refund through)", i+1, err)
		}
		s.clock.Advance(time.Minute)
		if _, err := s.Reconciler().RepairAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.bound("after the refund")
	s.even("after the refund", map[string]int64{"a": 10})
	infos, err := s.Orders(ctx, []string{"fb"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State == stock.StateConfirmed {
		t.Fatalf("fb after the refund: still confirmed")
	}
}

// A sale the gate lost (a flush, then a rebuild) is partly returned at the
// record alone (the gate does not know it); a late repeat of its Deduct
// and Confirm (a client retrying lost replies) makes the gate take it
// again, as a sale of every unit. The refund of the rest gives back only
// the rest: the gate's copy, which misses the return, gives nothing back.
func TestShopRefundOfASaleTheGateTookAgainAfterAReturnAtTheRecordAloneReturnsOnce(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.sell("o1", 3, "a")
	s.mr.FlushAll()
	s.even("after the flush", map[string]int64{"a": 7})
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := s.RevertItems(ctx, r1); err != nil {
		t.Fatalf("partial return of the order the gate lost: %v", err)
	}
	s.bound("after the partial return")
	s.even("after the partial return", map[string]int64{"a": 8})
	s.retake(stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}})
	s.bound("after the repeats")
	s.even("after the repeats", map[string]int64{"a": 8})
	s.refundAll("o1") // 2 units were left to give back
}

// The same without a data loss: a sale the fallback took (the gate never
// had it) is partly returned at the record alone; the client's late
// retries of its Deduct and Confirm reach a node whose breaker lets
// traffic through the flow, and the gate takes the order as a sale of
// every unit. The refund of the rest gives back only the rest.
func TestShopRefundOfAFallbackSaleTheGateTookAgainReturnsOnce(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}
	s.SetMode(degrade.ForceFallback)
	s.sell("o1", 3, "a")
	s.SetMode(degrade.Auto)
	s.even("after the sale at the fallback", map[string]int64{"a": 7})
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := s.Flow().RevertItems(ctx, r1); err != nil {
		t.Fatalf("partial return of the sale the gate never had: %v", err)
	}
	s.bound("after the partial return")
	s.even("after the partial return", map[string]int64{"a": 8})
	s.retake(o)
	s.bound("after the repeats")
	s.even("after the repeats", map[string]int64{"a": 8})
	s.refundAll("o1") // 2 units were left to give back
}

// An order in doubt at the primary (the gate took its hold, the record
// step failed) that the record path settles while the breaker is open is
// still the gate's too: a partial return of it on that node waits for the
// breaker (degrade.ErrBusy, nothing written) rather than being made at
// the record alone, and once made through the flow, it and the refund of
// the rest give every unit back once.
func TestShopReturnOfAnOrderInDoubtSettledByTheFallbackWaitsForTheGate(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.inDoubtAtFallback(stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}})
	s.SetMode(degrade.Auto)
	if g, err := s.Flow().Gate().(stock.OrderReader).Orders(ctx, []string{"o1"}); err != nil || g[0].State != stock.StateHeld {
		t.Fatalf("the gate's copy: %+v, %v; want held", g, err)
	}
	// Another node, its breaker closed, confirms through the flow.
	if err := s.Flow().Confirm(ctx, "o1"); err != nil {
		t.Fatalf("confirm through the flow: %v", err)
	}
	s.even("after the sale", map[string]int64{"a": 7})
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	// This node's breaker has not let traffic through since: the return
	// waits (the gate holds the order), with nothing written, and the
	// breaker recalibrates the gate in the background.
	if err := s.RevertItems(ctx, r1); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("partial return before the breaker lets traffic through: %v, want degrade.ErrBusy", err)
	}
	s.bound("after the return that waits")
	// Its retry once the breaker does: after the recalibration's pass. A
	// pass that reads between the return's two steps counts the units the
	// gate gave back and the record not yet as sold (see package
	// reconcile), and corrects the gate down until the next pass.
	s.awaitRecalibration()
	if err := s.Flow().RevertItems(ctx, r1); err != nil {
		t.Fatalf("partial return: %v", err)
	}
	s.bound("after the partial return")
	s.even("after the partial return", map[string]int64{"a": 8})
	s.refundAll("o1") // 2 units were left to give back
}

// The same order in doubt, settled by the record path: an extension of
// its hold on that node reaches the gate, which holds it too, so the hold
// lasts until the new deadline and the buyer can pay then.
func TestShopExtendedHoldOfAnOrderInDoubtSettledByTheFallbackIsKept(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "c", Units: 10, HoldTTL: 15 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.inDoubtAtFallback(stock.Order{ID: "o1", Items: []stock.Item{{SKU: "c", Qty: 3}}})
	s.SetMode(degrade.Auto)
	s.clock.Advance(10 * time.Minute)
	if err := s.ExtendHold(ctx, "o1", s.clock.Now().Add(14*time.Minute)); err != nil {
		t.Fatalf("ExtendHold to 24 minutes in: %v", err)
	}
	s.clock.Advance(10 * time.Minute) // past the 15-minute hold, well before the new deadline
	if _, err := s.ReclaimExpired(ctx, 10); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if g, r := s.available("c"); g > r {
		t.Fatalf("after the reclaim: SKU c: gate %d available, record %d: the gate sells %d units the record does not have", g, r, g-r)
	}
	infos, err := s.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State != stock.StateHeld {
		t.Fatalf("o1 20 minutes in, its hold extended to 24 minutes: %v, want held", infos[0].State)
	}
	if err := s.Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm 20 minutes in, the hold extended to 24 minutes: %v, want nil", err)
	}
}

// A refund through the flow of a sale the fallback took and the gate took
// again races a partial return on the node that remembers the fallback
// took it, and a repair, all between the flow's read of the record and its
// refund at the gate: the partial return waits for the gate (the record
// path makes none alone), so every unit comes back once.
func TestShopRefundRacingAReturnOnTheNodeThatRemembersTheFallbackReturnsOnce(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	fallbackSaleTheGateTookAgain(t, s)
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	ran := s.raceAtGate("Revert", func() {
		// The node that sold it at the fallback remembers so: its
		// return goes to the record path (tiered.Fallback.RevertItems).
		if err := s.RevertItems(ctx, r1); err != nil {
			t.Errorf("partial return on the node that remembers the fallback took o1: %v", err)
		}
		// Its breaker, back from ForceFallback, recalibrates the gate in
		// the background: its pass ends before the refund goes on.
		s.awaitRecalibration()
	})
	s.refundAll("o1")
	ran()
}

// A retry of a partial return through the flow (its first reply lost)
// races its first attempt on the node that remembers the fallback took the
// order, and a repair: the return is applied once.
func TestShopReturnRetryRacingItsFirstAttemptOnTheOtherNodeReturnsOnce(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	fallbackSaleTheGateTookAgain(t, s)
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	ran := s.raceAtGate("RevertItems", func() {
		if err := s.RevertItems(ctx, r1); err != nil {
			t.Errorf("first attempt, on the node that remembers the fallback took o1: %v", err)
		}
		// Its breaker's recalibration ends before the retry goes on.
		s.awaitRecalibration()
	})
	if err := s.Flow().RevertItems(ctx, r1); err != nil {
		t.Fatalf("retry through the flow: %v", err)
	}
	ran()
	s.bound("after the return, its retry and a repair")
	s.even("after the return", map[string]int64{"a": 8})
}

// A partial return of a hold cancelled at the record alone (forced to the
// fallback) is answered stock.ErrOrderClosed, and the hold the gate still
// had ends with it.
func TestShopPartialReturnOfAHoldCancelledAtTheRecordAloneIsClosed(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.hold("o1", 3, "a")
	s.SetMode(degrade.ForceFallback)
	if err := s.Revert(ctx, "o1"); err != nil {
		t.Fatalf("cancel forced to the fallback: %v", err)
	}
	s.SetMode(degrade.Auto)
	infos, err := s.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if infos[0].State != stock.StateReverted {
		t.Fatalf("o1 after the cancel: %v, want reverted", infos[0].State)
	}
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := s.Flow().RevertItems(ctx, r1); !errors.Is(err, stock.ErrOrderClosed) {
		t.Fatalf("partial return of the cancelled order o1 (reverted): %v, want stock.ErrOrderClosed", err)
	}
}

// While the operator forces traffic to the fallback, an extension of a hold
// the gate may have (one this node does not remember the fallback took) is
// refused with nothing written (an unknown outcome, degrade.ErrPrimaryDown):
// made at the record alone, the gate would still end the hold at its old
// deadline. Once traffic is back, the extension through the flow lasts.
func TestShopExtendHoldForcedToTheFallbackWaitsForTheGate(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "c", Units: 10, HoldTTL: 15 * time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s.hold("o1", 3, "c")
	before, err := s.Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	s.SetMode(degrade.ForceFallback)
	s.clock.Advance(10 * time.Minute)
	if err := s.ExtendHold(ctx, "o1", s.clock.Now().Add(14*time.Minute)); !errors.Is(err, degrade.ErrPrimaryDown) || !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("ExtendHold forced to the fallback: %v, want an unknown outcome with degrade.ErrPrimaryDown", err)
	}
	after, err := s.Flow().Orders(ctx, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	if !after[0].Deadline.Equal(before[0].Deadline) {
		t.Fatalf("o1's deadline after the refused extension: %v, want %v unchanged", after[0].Deadline, before[0].Deadline)
	}
	s.SetMode(degrade.Auto)
	if err := s.Flow().ExtendHold(ctx, "o1", s.clock.Now().Add(14*time.Minute)); err != nil {
		t.Fatalf("ExtendHold through the flow: %v", err)
	}
	s.clock.Advance(10 * time.Minute) // past the 15-minute hold, before the new deadline
	if _, err := s.ReclaimExpired(ctx, 10); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if err := s.Flow().Confirm(ctx, "o1"); err != nil {
		t.Fatalf("Confirm 20 minutes in, the hold extended to 24 minutes: %v", err)
	}
	s.bound("after the Confirm")
}

// fallbackSaleTheGateTookAgain sells o1 (3 units of a) at the fallback
// alone (ForceFallback), then has the gate take it again as a sale
// (retake), as in TestShopRefundOfAFallbackSaleTheGateTookAgainReturnsOnce.
func fallbackSaleTheGateTookAgain(t *testing.T, s *returnShop) {
	t.Helper()
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}
	s.SetMode(degrade.ForceFallback)
	s.sell("o1", 3, "a")
	s.SetMode(degrade.Auto)
	s.even("after the sale at the fallback", map[string]int64{"a": 7})
	s.retake(o)
	s.even("after the repeats", map[string]int64{"a": 7})
}

// A hold the gate took again after a return at the record alone (the gate
// had lost it) holds more at the gate than at the record: a return of
// more than the record has left is refused with nothing written at either
// tier.
func TestShopRefusedReturnOfAHeldCopyTheGateTookAgainWritesNothing(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}
	s.hold("o1", 3, "a")
	s.mr.FlushAll()
	s.even("after the flush", map[string]int64{"a": 7})
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := s.RevertItems(ctx, r1); err != nil {
		t.Fatalf("partial return of the hold the gate lost: %v", err)
	}
	s.even("after the partial return", map[string]int64{"a": 8})
	if err := s.Flow().Deduct(ctx, o); err != nil {
		t.Fatalf("repeat Deduct: %v", err)
	}
	if _, err := s.Reconciler().RepairAll(ctx); err != nil {
		t.Fatal(err)
	}
	s.bound("after the repeat and a repair")
	g0, r0 := s.available("a")
	r2 := stock.Return{OrderID: "o1", OpID: "r2", Items: []stock.Item{{SKU: "a", Qty: 3}}}
	err := s.RevertItems(ctx, r2)
	g1, r1a := s.available("a")
	if err != nil && (g1 != g0 || r1a != r0) {
		t.Fatalf("return of 3 units of o1 (2 left at the record): %v, and gate %d -> %d, record %d -> %d available; want a refusal with nothing written", err, g0, g1, r0, r1a)
	}
	s.bound("after the return of 3 units")
}

// A hold partly returned through the flow (r1) and then cancelled at the
// record alone: a new return (r2, another OpID, the same units) is not a
// repeat: it is answered stock.ErrOrderClosed, and the hold the gate still
// had ends.
func TestShopNewReturnOfAHoldCancelledAtTheRecordAloneIsClosed(t *testing.T) {
	s := newReturnShop(t)
	ctx := t.Context()
	s.hold("o1", 3, "a")
	r1 := stock.Return{OrderID: "o1", OpID: "r1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	if err := s.RevertItems(ctx, r1); err != nil {
		t.Fatalf("partial return: %v", err)
	}
	if err := s.Flow().Fallback().Revert(ctx, "o1"); err != nil {
		t.Fatalf("cancel at the record alone: %v", err)
	}
	r2 := stock.Return{OrderID: "o1", OpID: "r2", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	err := s.Flow().RevertItems(ctx, r2)
	g, gerr := s.Flow().Gate().(stock.OrderReader).Orders(ctx, []string{"o1"})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if !errors.Is(err, stock.ErrOrderClosed) || g[0].State == stock.StateHeld {
		t.Fatalf("new return r2 of the cancelled order: %v, gate copy %v; want stock.ErrOrderClosed and the gate's hold ended (r2 is not a repeat of r1)", err, g[0].State)
	}
}
