package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// sell runs the whole sale on the stores cfg names and reports it.
func sell(ctx context.Context, cfg config, progress io.Writer) (*report, error) {
	// The plot's file is created first, so a path that cannot be written
	// fails before the sale rather than after it.
	var plotFile *os.File
	if cfg.plotFile != "" {
		f, err := os.Create(cfg.plotFile)
		if err != nil {
			return nil, fmt.Errorf("-plot: %w", err)
		}
		defer f.Close()
		plotFile = f
	}
	tel, err := startTelemetry(cfg, progress)
	if err != nil {
		return nil, err
	}
	defer tel.close()
	// -plot counts the units the reclaim passes return as each store
	// reports them (see countReclaimed).
	obs, reclaimed := tel.observer(), &reclaimCounts{}
	if cfg.plotFile != "" {
		obs = reclaimed.observer(obs)
	}
	sys, err := build(ctx, cfg, obs)
	if err != nil {
		return nil, err
	}
	defer sys.close()

	listings := split(cfg)
	skus := make([]string, len(listings))
	for i, l := range listings {
		skus[i] = l.SKU
	}
	if err := putOnSale(ctx, sys, listings); err != nil {
		return nil, err
	}
	st := newStats(cfg.attempts)
	q := &queue{rdb: sys.rdb, stream: sys.prefix + ":orders", dead: sys.prefix + ":dead",
		group: "record", minIdle: max(200*time.Millisecond, cfg.hold/5), maxDeliveries: cfg.maxDeliveries}
	if err := q.setup(ctx); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	sh := &shop{sys: sys, q: q, st: st, cfg: cfg}
	q.handle, q.onDead, sys.enqueue = sh.record, sh.deadLettered, sh.enqueue
	if err := tel.watch(sys, q, skus); err != nil {
		return nil, err
	}

	// The background: queue consumers, redelivery, and both reclaimers.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	goBg := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	for i := range cfg.consumers {
		goBg(func() { q.consume(bg, "c"+strconv.Itoa(i)) })
	}
	goBg(func() { q.redeliver(bg, "claimer", q.minIdle/2) })
	// One reclaimer for both tiers (degrade.Manager.ReclaimExpired: the
	// record's holds, then the tiered flow's), which can be stopped between
	// batches for the final comparison.
	reclaimer := &guardedReclaimer{r: sys.orders}
	goBg(func() {
		_ = stock.RunReclaimer(bg, reclaimer, stock.ReclaimerConfig{Interval: max(20*time.Millisecond, cfg.hold/10)})
	})
	defer func() { stopBg(); wg.Wait() }()
	// The repairer, stopped before the final check.
	repCtx, stopRepairs := context.WithCancel(bg)
	repDone := make(chan struct{})
	go func() { defer close(repDone); sys.repairs.run(repCtx, max(50*time.Millisecond, cfg.hold/10)) }()
	defer func() { stopRepairs(); <-repDone }()

	start := time.Now()
	sys.breaker.start = start // before any traffic: the log's times are from here
	var tl *timeline
	if cfg.plotFile != "" {
		tl = &timeline{sys: sys, st: st, q: q, reclaimed: reclaimed, skus: skus, start: start}
		tl.run(bg, sampleEvery(cfg.duration))
	}
	var chaosDone <-chan chaosReport
	selling := make(chan struct{})
	if cfg.chaos {
		chaosDone = chaos(sys.redis, sys.breaker, cfg.duration, max(200*time.Millisecond, cfg.duration/5), selling)
	}
	buyers(ctx, cfg, sh, skus, progress)
	elapsed := time.Since(start)
	close(selling)
	var chaosRep *chaosReport
	if chaosDone != nil {
		r := <-chaosDone
		chaosRep = &r
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Close the sale: every hand-off recorded or dead-lettered, every
	// payment made, then the two tiers compared once they have settled.
	drainCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := q.drain(drainCtx); err != nil {
		return nil, fmt.Errorf("queue did not drain: %d hand-offs in flight", q.inFlight())
	}
	sh.payers.Wait()
	settle(drainCtx, sys, listings, cfg.hold+time.Second)
	reclaimer.stop()
	var samples []sample
	if tl != nil {
		samples = tl.stop(drainCtx)
	}

	rep := &report{Backend: sys.name, SKUs: len(listings), OnSale: cfg.units, Attempts: cfg.attempts,
		Orders: st.orders.Load(), LatePay: st.latePay.Load(),
		Refused: st.refusedByRecord.Load(), Expired: st.expiredInQueue.Load(),
		Redelivered: q.redelivered.Load(), DeadLetters: q.deadLettered.Load(),
		Degraded: st.degraded.Load()}
	if chaosRep != nil {
		chaosRep.BreakerTrips = sys.breaker.trips.Load()
		chaosRep.States = sys.breaker.log()
		chaosRep.Recalibrations = sys.breaker.recalibrations.Load()
		chaosRep.Recalibrated = sys.breaker.recalibrated.Load()
		if chaosRep.RedisDownS > 0 {
			chaosRep.DegradedPerS = round(float64(rep.Degraded)/chaosRep.RedisDownS, 0)
		}
		rep.Chaos = chaosRep
	}
	rep.fill(st, elapsed)
	stopRepairs()
	<-repDone
	rep.Repaired = sys.repairs.corrected.Load()
	// The reconciler checks Redis against the database: what it corrects
	// is reported (orders the database took alone while the breaker was
	// open are such a correction; a sale without faults needs none).
	if err := finalReconcile(drainCtx, sys, rep); err != nil {
		return nil, err
	}
	if err := check(ctx, sys, listings, st, rep); err != nil {
		return nil, err
	}
	if tl != nil {
		err := drawTimeline(plotFile, samples, skus, plotTitle(rep, cfg))
		if err = errors.Join(err, plotFile.Close()); err != nil {
			return nil, fmt.Errorf("-plot: %w", err)
		}
		if !cfg.quiet {
			fmt.Fprintf(progress, "flashsale: plot in %s\n", cfg.plotFile)
		}
	}
	return rep, nil
}

// split spreads cfg.units over cfg.skus SKUs, the first the largest.
func split(cfg config) []stock.Listing {
	weights := 0
	for i := range cfg.skus {
		weights += cfg.skus - i
	}
	out := make([]stock.Listing, cfg.skus)
	left := cfg.units
	for i := range out {
		n := max(1, cfg.units*int64(cfg.skus-i)/int64(weights))
		if i == len(out)-1 {
			n = left
		}
		left -= n
		out[i] = stock.Listing{SKU: "sku-" + strconv.Itoa(i+1), Units: n, PerUserLimit: cfg.perUser, HoldTTL: cfg.hold}
	}
	return out
}

// putOnSale puts the listings on sale through the tiered flow: the gate
// gets each listing's hold time and decides when a hold ends; the record
// gets a longer one, a backstop the tiered reclaimer never needs while it
// runs (it returns the record's copy of every hold the gate returns).
func putOnSale(ctx context.Context, sys *system, listings []stock.Listing) error {
	for _, l := range listings {
		if err := sys.flow.PutOnSale(ctx, l); err != nil {
			return fmt.Errorf("put %s on sale: %w", l.SKU, err)
		}
	}
	return nil
}

// settle waits, at most within, until the gate and the record agree on every
// SKU's available units: reverts the reclaimers mirror may still be on
// their way.
func settle(ctx context.Context, sys *system, listings []stock.Listing, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		agree := true
		for _, l := range listings {
			g, err1 := sys.gate.Available(ctx, l.SKU)
			r, err2 := sys.record.Available(ctx, l.SKU)
			if err1 != nil || err2 != nil || g != r {
				agree = false
				break
			}
		}
		if agree || pause(ctx, 50*time.Millisecond) != nil {
			return
		}
	}
}

// finalReconcile runs one reconcile pass over every SKU and notes what it
// corrected in rep.
func finalReconcile(ctx context.Context, sys *system, rep *report) error {
	r, err := sys.final.RepairAll(ctx)
	for _, c := range r.Corrections {
		rep.Reconciled += abs(c.Delta)
		rep.Corrections = append(rep.Corrections, fmt.Sprintf("%s: %s Redis from %d to %d (database %d, in flight %d, returning %d)",
			c.SKU, c.Action, c.Before, c.After, c.Record, c.InFlight, c.Returning))
	}
	if err != nil {
		return fmt.Errorf("final reconcile: %w", err)
	}
	return nil
}

// check fills the final levels, oversold and drift into rep.
func check(ctx context.Context, sys *system, listings []stock.Listing, st *stats, rep *report) error {
	rep.Accounting = true
	for _, l := range listings {
		rec, err := sys.record.Levels(ctx, l.SKU)
		if err != nil {
			return fmt.Errorf("record levels of %s: %w", l.SKU, err)
		}
		gate, err := sys.gate.Levels(ctx, l.SKU)
		if err != nil {
			return fmt.Errorf("gate levels of %s: %w", l.SKU, err)
		}
		rep.Sold += rec.Sold
		rep.Held += rec.Held
		rep.Available += rec.Available
		if over := rec.Sold + rec.Held - l.Units; over > 0 {
			rep.Oversold += over
		}
		if d := gate.Available - rec.Available; d != 0 {
			rep.Drift += abs(d)
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: Redis has %d available, the database %d", l.SKU, gate.Available, rec.Available))
		}
		if rec.Available+rec.Held+rec.Sold != l.Units {
			rep.Accounting = false
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: available %d + held %d + sold %d != %d on sale", l.SKU, rec.Available, rec.Held, rec.Sold, l.Units))
		}
	}
	rep.Returned = st.taken.Load() - rep.Held - rep.Sold
	rep.Resold = max(0, rep.Returned-rep.Available)
	rep.Unpaid = rep.Orders - st.paid.Load()
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// guardedReclaimer is a reclaimer that can be stopped between batches: once
// stop returns, no batch is in progress and none starts.
type guardedReclaimer struct {
	r       stock.Reclaimer
	mu      sync.Mutex
	stopped bool
}

// ReclaimExpired implements stock.Reclaimer.
func (g *guardedReclaimer) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil, nil
	}
	return g.r.ReclaimExpired(ctx, limit)
}

func (g *guardedReclaimer) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}
