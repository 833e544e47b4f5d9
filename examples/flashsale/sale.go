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

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/handoff"
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
	q := sys.q
	b := q.b
	sh := &shop{sys: sys, q: q, st: st, cfg: cfg}
	for i := range cfg.consumers {
		c, err := sys.shop.Consumer(b.source("c"+strconv.Itoa(i)), handoff.ConsumerConfig{
			Batch: cfg.batch, MaxAttempts: int(cfg.maxDeliveries), Done: sh.settled})
		if err != nil {
			return nil, err
		}
		q.consumers = append(q.consumers, c)
	}
	if err := tel.watch(sys, q, skus); err != nil {
		return nil, err
	}

	// The background: queue consumers (each claims what another left
	// unacknowledged past the broker's timeout), and the shop's own
	// work (reclaimers, reconciliation, repairs), stopped for the final
	// check.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, c := range q.consumers {
		wg.Go(func() { _ = c.Run(bg) })
	}
	defer func() { stopBg(); wg.Wait() }()
	sys.fixes.during = func() bool { return sys.shop.State("") == degrade.Recalibrating }
	runCtx, stopRun := context.WithCancel(bg)
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = sys.shop.Run(runCtx) }()
	defer func() { stopRun(); <-runDone }()

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
	watch := &undersell{sys: sys, q: q, st: st, skus: skus, from: start.Add(cfg.duration - 2*undersellWindow)}
	watchDone := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(bg)
	go func() { defer close(watchDone); watch.run(watchCtx) }()
	buyers(ctx, cfg, sh, skus, progress)
	elapsed := time.Since(start)
	stopWatch()
	<-watchDone
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
	// The flow comes to rest: every hold paid or returned at both tiers
	// (the record's own deadline, the latest, is twice the hold time).
	rest(drainCtx, sys, skus, 2*cfg.hold+5*time.Second)
	stopRun()
	<-runDone
	var samples []sample
	if tl != nil {
		samples = tl.stop(drainCtx)
	}

	rep := &report{Backend: sys.name, SKUs: len(listings), OnSale: cfg.units, Attempts: cfg.attempts,
		Orders: st.orders.Load(), LatePay: st.latePay.Load(),
		Refused: st.refusedByRecord.Load(), Expired: st.expiredInQueue.Load(),
		Redelivered: q.redelivered.Load(), DeadLetters: q.deadLettered.Load(),
		Degraded: st.degraded.Load(), Queue: b.name, ExpiredDelivered: q.expired.Load()}
	p50, p99, n := q.lagQuantiles()
	rep.Handoffs, rep.LagP50ms, rep.LagP99ms = int64(n), ms(p50), ms(p99)
	rep.fill(st, elapsed)
	rep.Lost = sh.lost()
	rep.Undersold = watch.left
	rep.UndersoldBound = undersoldBound(cfg)
	if chaosRep != nil {
		chaosRep.BreakerTrips = sys.breaker.trips.Load()
		chaosRep.States = sys.breaker.log()
		chaosRep.Recalibrations = sys.breaker.recalibrations.Load()
		chaosRep.Recalibrated = sys.fixes.recalibrated.Load()
		if chaosRep.RedisDownS > 0 {
			chaosRep.DegradedPerS = round(float64(rep.Degraded)/chaosRep.RedisDownS, 0)
		}
		rep.Chaos = chaosRep
	}
	rep.Repaired = sys.fixes.repaired.Load()
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

// putOnSale puts the listings on sale through the shop: the gate gets each
// listing's hold time and decides when a hold ends; the record gets a
// longer one, a backstop the shop's reclaimer never needs while it runs (it
// returns the record's copy of every hold the gate returns).
func putOnSale(ctx context.Context, sys *system, listings []stock.Listing) error {
	for _, l := range listings {
		if err := sys.shop.PutOnSale(ctx, l); err != nil {
			return fmt.Errorf("put %s on sale: %w", l.SKU, err)
		}
	}
	return nil
}

// available is the units still for sale on skus: the record's available
// units less those promised to orders on their way to it: the units of
// hand-offs in the queue or being placed, or, when more, those the gate
// has taken and the record not (an order whose hand-off failed, held at
// the gate until its deadline). An error counts as none: the check at the
// end reads the tiers again.
func available(ctx context.Context, sys *system, q *queue, skus []string) int64 {
	var n int64
	for _, sku := range skus {
		r, err1 := sys.record.Levels(ctx, sku)
		g, err2 := sys.gate.Levels(ctx, sku)
		if err1 == nil && err2 == nil {
			n += max(0, r.Available-max(q.onTheWay(sku), g.Held+g.Sold-r.Held-r.Sold))
		}
	}
	return n
}

// undersell watches the end of the sale for units left for sale while
// buyers are told they are sold out: every sample, each SKU's units for
// sale (available) and its sold-out refusals so far. left is the units that
// were for sale throughout the last span of undersellWindow before the
// buyers stopped, of the SKUs whose buyers were refused as sold out in it:
// units nobody could buy, not ones just back from an unpaid hold. (Mid-sale
// a flow catching up after an outage may leave some for a moment: the
// verdict is on the end.)
type undersell struct {
	sys  *system
	q    *queue
	st   *stats
	skus []string
	from time.Time // when the sampling starts: the sale's last moments
	left int64
}

// undersellWindow is the span over which units must stay for sale, while
// buyers hear "sold out", to count as undersold; a sample is taken every
// tenth of it.
const undersellWindow = 250 * time.Millisecond // sampled every tenth of it

func (u *undersell) run(ctx context.Context) {
	type sample struct{ left, soldOut int64 }
	wins := make([][]sample, len(u.skus))
	if pause(ctx, time.Until(u.from)) != nil {
		return
	}
	t := time.NewTicker(undersellWindow / 10)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var left int64
		for i, sku := range u.skus {
			win := append(wins[i], sample{available(ctx, u.sys, u.q, []string{sku}), u.st.soldOutOf(sku)})
			if len(win) > 11 {
				win = win[len(win)-11:]
			}
			wins[i] = win
			if len(win) < 11 || win[len(win)-1].soldOut == win[0].soldOut {
				continue // a short span, or nobody heard "sold out" in it
			}
			low := win[0].left
			for _, x := range win {
				low = min(low, x.left)
			}
			left += low
		}
		u.left = left
	}
}

// rest waits, at most within, until nothing is held at either tier: every
// hold paid, or returned by the shop's reclaimers (at the gate's deadline,
// at the latest at the record's).
func rest(ctx context.Context, sys *system, skus []string, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		held := false
		for _, sku := range skus {
			g, err1 := sys.gate.Levels(ctx, sku)
			r, err2 := sys.record.Levels(ctx, sku)
			if err1 != nil || err2 != nil || g.Held != 0 || r.Held != 0 {
				held = true
				break
			}
		}
		if !held || pause(ctx, 50*time.Millisecond) != nil {
			return
		}
	}
}

// undersoldBound is how many units a sale that sells what it has may
// leave for sale over a span in which buyers hear "sold out" (see
// undersell): one in two hundred of the units on sale, at least one per
// SKU (the buyers of a span each want one SKU).
func undersoldBound(cfg config) int64 {
	return max(int64(cfg.skus), cfg.units/200)
}

// finalReconcile runs one reconcile pass over every SKU and notes what it
// corrected in rep.
func finalReconcile(ctx context.Context, sys *system, rep *report) error {
	sys.fixes.final.Store(true)
	r, err := sys.shop.Reconciler().RepairAll(ctx)
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
		if n := rec.Held + gate.Held; n != 0 {
			rep.Leaked += n
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d units still held at rest (record %d, Redis %d)", l.SKU, n, rec.Held, gate.Held))
		}
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
