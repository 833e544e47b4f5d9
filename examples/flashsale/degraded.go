package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// wireBreaker puts a breaker in front of the flow: while Redis fails,
// orders go straight to the database record (no queue: the queue lives in
// the same Redis) at a much lower rate; when Redis is back, the reconciler
// repairs it from the database before traffic returns in steps. The
// breaker's timings scale with the sale's length, so a short sale still
// shows the whole cycle.
func (s *system) wireBreaker(cfg config) error {
	var err error
	s.breaker = &breakerLog{start: time.Now()}
	if s.recal, err = reconcile.New(s.gate, s.record, reconcile.Config{
		GateHold:     s.flow.GateHold,
		MaxAutoFix:   -1, // the sale's own figures: fix any size, and report it
		Observer:     s.obs,
		OnCorrection: func(c reconcile.Correction) { s.breaker.recalibrated.Add(abs(c.Delta)) },
	}); err != nil {
		return err
	}
	if s.final, err = reconcile.New(s.gate, s.record, reconcile.Config{GateHold: s.flow.GateHold, MaxAutoFix: -1, Observer: s.obs}); err != nil {
		return err
	}
	s.repairs = newRepairer()
	if s.repairs.r, err = reconcile.New(s.gate, s.record, reconcile.Config{
		GateHold:     s.flow.GateHold,
		MaxAutoFix:   -1,
		OnCorrection: func(c reconcile.Correction) { s.repairs.corrected.Add(abs(c.Delta)) },
		Observer:     s.obs,
	}); err != nil {
		return err
	}
	s.fallback = &fallback{Fallback: s.flow.Fallback(), dirty: s.repairs.mark}
	if s.orders, err = degrade.New(s.flow, s.fallback, degrade.Config{
		OpenFor:       max(200*time.Millisecond, cfg.duration/10),
		RampInterval:  max(100*time.Millisecond, cfg.duration/20),
		FallbackLimit: rate.Limit(cfg.fallbackRate),
		FallbackBurst: max(1, cfg.fallbackRate/10),
		Recalibrate: func(ctx context.Context, key string) error {
			s.breaker.recalibrations.Add(1)
			return s.recal.Recalibrate(ctx, key)
		},
		RecalibrateTimeout: 10 * time.Second,
		OnStateChange:      s.breaker.note,
		Observer:           s.obs,
	}); err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, s.orders.Close)
	return nil
}

// fallback is the database record as the breaker's fallback. It remembers
// the orders it took, so the shop knows they are recorded already (no
// hand-off to wait for), and marks the SKUs whose units it moved without
// Redis (orders it took, and their unpaid holds its reclaimer returned) for
// the repairer.
type fallback struct {
	*tiered.Fallback
	dirty func(skus ...string)
	took  sync.Map // order ID -> struct{}
}

// Deduct takes the order at the record and remembers it.
func (f *fallback) Deduct(ctx context.Context, o stock.Order) error {
	err := f.Fallback.Deduct(ctx, o)
	if err == nil {
		f.took.Store(o.ID, struct{}{})
		for _, it := range o.Items {
			f.dirty(it.SKU)
		}
	}
	return err
}

// ReclaimExpired returns the record's own unpaid holds: orders the record
// took alone (the gate never had them), or copies a stopped reclaimer left.
func (f *fallback) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	got, err := f.Fallback.ReclaimExpired(ctx, limit)
	for _, l := range got {
		f.dirty(l.SKU)
	}
	return got, err
}

// tookIt reports whether the fallback took the order.
func (f *fallback) tookIt(id string) bool {
	_, ok := f.took.Load(id)
	return ok
}

// breakerLog keeps what the breaker did, for the report. note runs on the
// breaker's event goroutine.
type breakerLog struct {
	start          time.Time
	trips          atomic.Int64
	recalibrations atomic.Int64
	recalibrated   atomic.Int64 // units the recalibrations corrected
	state          atomic.Int64 // the breaker's degrade.State now
	redisDown      atomic.Bool  // -chaos has Redis stopped

	mu     sync.Mutex
	states []string
}

func (b *breakerLog) note(e degrade.Event) {
	b.state.Store(int64(e.To))
	if e.To == degrade.Degraded && (e.From == degrade.Primary || e.From == degrade.Ramping) {
		b.trips.Add(1)
	}
	s := "breaker " + e.To.String()
	switch {
	case e.To == degrade.Ramping:
		s += fmt.Sprintf(" %.0f%%", 100*e.Share)
	case e.Err != nil:
		s += " (recalibration failed: " + e.Err.Error() + ")"
	}
	b.at(e.At, s)
}

// event notes something that happens now.
func (b *breakerLog) event(s string) { b.at(time.Now(), s) }

// at notes something that happened at t, with the time since the start.
func (b *breakerLog) at(t time.Time, s string) {
	s = fmt.Sprintf("%5.2fs %s", t.Sub(b.start).Seconds(), s)
	b.mu.Lock()
	b.states = append(b.states, s)
	b.mu.Unlock()
}

func (b *breakerLog) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.states...)
}

// repairer reconciles Redis with the database once the shop knows they
// drifted: the fallback moved units without Redis, or the tiered reclaimer
// reported a sale confirmed at the database alone (whose Redis hold then
// expired). From then on it repairs every SKU each interval: the drift of
// a degraded spell keeps surfacing for a hold time after it (units the
// database sold directly were also promised to orders waiting in the
// queue, which the database then refuses, and whose Redis holds come back
// when they expire). A sale without faults marks nothing and repairs
// nothing.
type repairer struct {
	r         *reconcile.Reconciler
	corrected atomic.Int64 // units
	drifted   atomic.Bool
	kick      chan struct{}
}

func newRepairer() *repairer { return &repairer{kick: make(chan struct{}, 1)} }

// mark notes drift and asks for a pass now (a returned unit that Redis
// must not resell is sold again within milliseconds in a flash sale).
func (p *repairer) mark(...string) {
	p.drifted.Store(true)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run repairs every SKU at each kick and every interval once marked, until
// ctx ends.
func (p *repairer) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		if p.drifted.Load() {
			_, _ = p.r.RepairAll(ctx) // Redis down, or a SKU left: again next time
		}
	}
}
