package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// shop is the order path of the sale, on the library's tiered flow: the
// gate takes a hold (tiered.Manager.Place), the queue carries the order to
// the record (tiered.Manager.Settle), the buyer pays (Confirm) or walks
// away, and the reclaimer returns what was not paid for.
type shop struct {
	sys *system
	q   *queue
	st  *stats
	cfg config

	payers sync.WaitGroup
	// recorded holds the order IDs the record has taken, so a redelivered
	// message does not schedule a second payment.
	recorded sync.Map
	// placed holds the order IDs told yes, ended those whose hand-off
	// ended: recorded, expired in the queue, refused by the record or
	// dead-lettered. A placed order that never ended is a lost sale.
	placed, ended sync.Map
	// soldOut maps a SKU to the time (Unix ns) until which this node
	// answers "sold out" without asking the gate: a local mark that keeps
	// the flood of late buyers off Redis, and expires soon enough that
	// returned units are sold again.
	soldOut sync.Map
}

// soldOutFor is how long a local sold-out mark lasts.
const soldOutFor = 50 * time.Millisecond

// buy runs one purchase attempt past the limiter: a hold at the gate and the
// hand-off to the queue. It returns the rejection reason, or "" when the
// order was taken.
func (s *shop) buy(ctx context.Context, o stock.Order) reason {
	it := o.Items[0]
	if until, ok := s.soldOut.Load(it.SKU); ok && time.Now().UnixNano() < until.(int64) {
		s.st.refusedSoldOut(it.SKU)
		return reasonSoldOut
	}
	// Backpressure: past queueMax hand-offs in flight, new orders are
	// turned away as busy (a retry later succeeds). The lag has its own
	// bound in the flow: the handoff.Recorder refuses new orders while the
	// consumers lag past -max-lag (tiered.ErrNotAdmitted, busy too), unless
	// the breaker sends them to the record directly.
	if s.q.inFlight() >= int64(s.cfg.queueMax) {
		return reasonBusy
	}
	s.q.place(it.SKU, it.Qty)
	p, err := s.sys.place(ctx, o)
	s.q.place(it.SKU, -it.Qty)
	if err != nil {
		if errors.Is(err, stock.ErrSoldOut) {
			s.st.refusedSoldOut(it.SKU)
			s.soldOut.Store(it.SKU, time.Now().Add(soldOutFor).UnixNano())
		}
		if !stock.IsBusiness(err) && !errors.Is(err, tiered.ErrNotAdmitted) {
			// The gate may hold the order without a hand-off: give it
			// back now (or the gate reclaimer will at the deadline).
			_ = s.sys.shop.Revert(ctx, o.ID)
		}
		return classify(err)
	}
	s.st.orders.Add(1)
	s.st.taken.Add(it.Qty)
	s.placed.Store(o.ID, struct{}{})
	if p == tiered.Recorded {
		// The breaker was open: the record itself took the order, so it
		// is recorded already and no hand-off follows.
		s.st.degraded.Add(1)
		s.ended.Store(o.ID, struct{}{})
		if _, dup := s.recorded.LoadOrStore(o.ID, struct{}{}); !dup {
			s.schedulePayment(context.WithoutCancel(ctx), o.ID)
		}
	}
	return ""
}

// settled is the consumers' Done: a hand-off ended. Recorded, the buyer
// may pay; a business outcome ended the order (the gate hold expired in
// the queue, or the record refused it and the gate hold was reverted); a
// dead-lettered one, which could not be recorded after all its
// deliveries, is reverted so its units go back on sale.
func (s *shop) settled(ctx context.Context, m handoff.Message, err error) {
	s.q.done(m, err)
	id := m.Order.ID
	s.ended.Store(id, struct{}{})
	switch {
	case err == nil:
		if _, dup := s.recorded.LoadOrStore(id, struct{}{}); !dup {
			s.schedulePayment(ctx, id)
		}
	case errors.Is(err, stock.ErrHoldExpired):
		s.st.expiredInQueue.Add(1)
	case errors.Is(err, handoff.ErrDeadLettered):
		_ = retry(ctx, func() error { return s.sys.shop.Revert(ctx, id) })
	case stock.IsBusiness(err):
		s.st.refusedByRecord.Add(1)
	}
}

// lost counts the orders told yes whose hand-off never ended: sales the
// report cannot explain.
func (s *shop) lost() int64 {
	var n int64
	s.placed.Range(func(id, _ any) bool {
		if _, ok := s.ended.Load(id); !ok {
			n++
		}
		return true
	})
	return n
}

// schedulePayment decides whether the buyer pays, and if so pays at a random
// moment within 40% of the hold time from now: most payments beat the
// gate's deadline, some (orders that waited long in the queue) come too
// late and are refused.
func (s *shop) schedulePayment(ctx context.Context, id string) {
	if rand.Float64() < s.cfg.unpaid {
		return // never pays: the reclaimer returns the units
	}
	delay := rand.N(s.cfg.hold * 4 / 10)
	s.payers.Add(1)
	time.AfterFunc(delay, func() {
		defer s.payers.Done()
		s.pay(ctx, id)
	})
}

// pay confirms the order; a hold that expired first is refused.
func (s *shop) pay(ctx context.Context, id string) {
	if err := retry(ctx, func() error { return s.sys.shop.Confirm(ctx, id) }); err == nil {
		s.st.paid.Add(1)
	} else {
		s.st.latePay.Add(1)
	}
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

// classify maps a refused order to its rejection reason.
func classify(err error) reason {
	switch {
	case errors.Is(err, stock.ErrSoldOut):
		return reasonSoldOut
	case errors.Is(err, stock.ErrLimitReached):
		return reasonLimit
	case errors.Is(err, degrade.ErrBusy), errors.Is(err, stock.ErrContention):
		return reasonBusy
	default:
		return reasonUnavailable
	}
}
