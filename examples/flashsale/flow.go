package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// shop is the order path of the sale: the gate takes a hold, the queue
// carries it to the record, the buyer pays or walks away, and the
// reclaimers return what was not paid for. Both tiers learn of every
// confirm and revert, so they agree once the queue is drained.
type shop struct {
	sys   *system
	q     *queue
	st    *stats
	cfg   config
	guard time.Duration // a hand-off this close to its gate deadline is not recorded

	payers sync.WaitGroup
	// recorded holds the order IDs the record has taken, so a redelivered
	// message does not schedule a second payment.
	recorded sync.Map
	// gone holds the order IDs whose gate hold ended (reclaimed, expired at
	// payment, compensated) before or while they were recorded.
	gone sync.Map
	// direct holds the order IDs taken by the record alone (degraded mode).
	direct sync.Map
	// soldOut maps a SKU to the time (Unix ns) until which this node
	// answers "sold out" without asking the gate: a local mark that keeps
	// the flood of late buyers off Redis, and expires soon enough that
	// returned units are sold again.
	soldOut sync.Map
}

// soldOutFor is how long a local sold-out mark lasts.
const soldOutFor = 50 * time.Millisecond

// buy runs one purchase attempt past the limiter: a hold at the gate, then
// the hand-off to the queue. It returns the rejection reason, or "" when the
// order was taken.
func (s *shop) buy(ctx context.Context, o stock.Order) reason {
	it := o.Items[0]
	if until, ok := s.soldOut.Load(it.SKU); ok && time.Now().UnixNano() < until.(int64) {
		return reasonSoldOut
	}
	if s.q.inFlight() >= int64(s.cfg.queueMax) {
		return reasonBusy
	}
	d, err := s.sys.deduct(ctx, o, s.cfg.hold)
	if err != nil {
		if errors.Is(err, stock.ErrSoldOut) {
			s.soldOut.Store(it.SKU, time.Now().Add(soldOutFor).UnixNano())
		}
		return classify(err)
	}
	s.st.orders.Add(1)
	s.st.taken.Add(it.Qty)
	if d.direct {
		// Taken by the record itself: nothing to hand off.
		s.st.degraded.Add(1)
		s.direct.Store(o.ID, struct{}{})
		s.recorded.Store(o.ID, struct{}{})
		s.schedulePayment(ctx, o.ID, d.deadline)
		return ""
	}
	h := handoff{OrderID: o.ID, UserID: o.UserID, SKU: it.SKU, Qty: it.Qty, Deadline: d.deadline}
	if err := s.q.publish(ctx, h); err != nil {
		// The hold stays at the gate without a record; give it back now
		// (or, if Redis is gone too, the gate reclaimer will at the deadline).
		s.gone.Store(o.ID, struct{}{})
		_ = s.sys.gate.Revert(ctx, o.ID)
		return reasonBusy
	}
	return ""
}

// record is the queue's handler: the database takes the order the gate
// holds, under the same order ID.
func (s *shop) record(ctx context.Context, h handoff) error {
	if time.Until(h.Deadline) < s.guard {
		// Too late to record: the gate reclaimer returns the hold, and
		// the record never takes it.
		s.st.expiredInQueue.Add(1)
		return nil
	}
	o := stock.Order{ID: h.OrderID, UserID: h.UserID, Items: []stock.Item{{SKU: h.SKU, Qty: h.Qty}}}
	err := s.sys.record.Deduct(ctx, o)
	switch {
	case err == nil:
	case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
		// The record still holds units the gate has already returned
		// and sold again: the revert is on its way. Redelivery retries.
		s.st.recordRetries.Add(1)
		return err
	case stock.IsBusiness(err):
		return errors.Join(errPermanent, err)
	default:
		return err
	}
	if _, ended := s.gone.Load(h.OrderID); ended {
		// The gate let go of the order while it was being recorded.
		return s.revertRecord(ctx, h.OrderID)
	}
	if _, dup := s.recorded.LoadOrStore(h.OrderID, struct{}{}); !dup {
		s.schedulePayment(ctx, h.OrderID, h.Deadline)
	}
	return nil
}

// deadLettered compensates an order the record could not take: the gate
// hold is reverted, so its units go back on sale.
func (s *shop) deadLettered(ctx context.Context, h handoff, _ error) {
	s.gone.Store(h.OrderID, struct{}{})
	_ = retry(ctx, func() error { return s.sys.gate.Revert(ctx, h.OrderID) })
	_ = s.revertRecord(ctx, h.OrderID)
}

// schedulePayment decides whether the buyer pays, and if so pays at a random
// moment before the deadline.
func (s *shop) schedulePayment(ctx context.Context, id string, deadline time.Time) {
	if rand.Float64() < s.cfg.unpaid {
		return // never pays: the reclaimer returns the units
	}
	window := time.Until(deadline) * 3 / 4
	if window <= 0 {
		window = time.Millisecond
	}
	delay := rand.N(window)
	s.payers.Add(1)
	time.AfterFunc(delay, func() {
		defer s.payers.Done()
		s.pay(ctx, id)
	})
}

// pay confirms the order at the tier that took it: the gate decides whether
// the hold is still live, then the record follows.
func (s *shop) pay(ctx context.Context, id string) {
	if _, direct := s.direct.Load(id); direct {
		if retry(ctx, func() error { return s.sys.record.Confirm(ctx, id) }) == nil {
			s.st.paid.Add(1)
		} else {
			s.st.latePay.Add(1)
		}
		return
	}
	err := retry(ctx, func() error { return s.sys.gateConfirm(ctx, id) })
	switch {
	case err == nil:
		if retry(ctx, func() error { return s.sys.record.Confirm(ctx, id) }) == nil {
			s.st.paid.Add(1)
		} else {
			s.st.confirmLost.Add(1)
		}
	case errors.Is(err, stock.ErrHoldExpired):
		// Too late: Confirm returned the units at the gate itself.
		s.gone.Store(id, struct{}{})
		s.st.latePay.Add(1)
		_ = s.revertRecord(ctx, id)
	default:
		s.st.latePay.Add(1) // Redis stayed away: the gate reclaimer returns it
	}
}

// gateReclaimed mirrors the gate reclaimer's returns into the record.
func (s *shop) gateReclaimed(ctx context.Context, got []stock.Reclaimed) {
	for _, r := range got {
		s.gone.Store(r.OrderID, struct{}{})
		s.st.reclaimed.Add(r.Qty)
		_ = s.revertRecord(ctx, r.OrderID)
	}
}

// recordReclaimed counts the record reclaimer's returns of orders the record
// took alone; an order that went through the gate was counted when the gate
// returned it.
func (s *shop) recordReclaimed(got []stock.Reclaimed) {
	for _, r := range got {
		if _, direct := s.direct.Load(r.OrderID); direct {
			s.st.reclaimed.Add(r.Qty)
		}
	}
}

// revertRecord cancels the order in the record, if the record took it.
func (s *shop) revertRecord(ctx context.Context, id string) error {
	err := retry(ctx, func() error { return s.sys.record.Revert(ctx, id) })
	if errors.Is(err, stock.ErrUnknownOrder) {
		return nil
	}
	return err
}

// retry calls f until it returns nil or a business outcome, at most 50
// times, pausing between infrastructure failures.
func retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < 50; i++ {
		err = f()
		if err == nil || stock.IsBusiness(err) || ctx.Err() != nil {
			return err
		}
		_ = pause(ctx, time.Duration(i+1)*10*time.Millisecond)
	}
	return err
}

// classify maps a failed hold to its rejection reason.
func classify(err error) reason {
	switch {
	case errors.Is(err, stock.ErrSoldOut):
		return reasonSoldOut
	case errors.Is(err, stock.ErrLimitReached):
		return reasonLimit
	case errors.Is(err, errBusy), errors.Is(err, stock.ErrContention):
		return reasonBusy
	default:
		return reasonUnavailable
	}
}
