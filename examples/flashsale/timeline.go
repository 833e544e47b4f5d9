package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/observe"
)

// reclaimCounts are the units the reclaim passes returned, by tier: the
// gate's passes (whose holds the tiered reclaimer then also returns at the
// record) and the record's own (orders the fallback took while the breaker
// was open, and copies whose record deadline passed first).
type reclaimCounts struct {
	gate, record atomic.Int64
}

// observer returns o that also counts each reclaim pass's units.
func (c *reclaimCounts) observer(o observe.Observer) observe.Observer {
	next := o.Reclaim
	o.Reclaim = func(ctx context.Context, r observe.Reclaim) {
		if r.Component == "redisstock" {
			c.gate.Add(r.Units)
		} else {
			c.record.Add(r.Units)
		}
		if next != nil {
			next(ctx, r)
		}
	}
	return o
}

// outcomes are the series of the plot's attempts panel: orders placed,
// then each rejection reason.
var outcomes = append([]string{"placed"}, func() []string {
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = string(r)
	}
	return out
}()...)

// sample is the sale at one moment.
type sample struct {
	at        float64  // seconds since the sale began
	available []int64  // the record's available units, per SKU; -1 if unread
	attempts  []int64  // cumulative, per outcome (see outcomes)
	queue     int64    // hand-offs in flight
	reclaimed [2]int64 // units returned unpaid by the gate's and the record's passes, cumulative
	breaker   int64    // degrade.State of the breaker
	redisDown bool     // -chaos has Redis stopped
}

// timeline samples the sale every interval for -plot, from start until
// stop is called.
type timeline struct {
	sys       *system
	st        *stats
	q         *queue
	reclaimed *reclaimCounts
	skus      []string
	start     time.Time

	mu      sync.Mutex
	samples []sample

	cancel context.CancelFunc
	done   chan struct{}
}

// sampleEvery is the sampling interval of a sale of length d: about 100
// samples while the attempts arrive.
func sampleEvery(d time.Duration) time.Duration {
	return min(time.Second, max(20*time.Millisecond, d/100))
}

// run samples until stop; call it on its own goroutine.
func (tl *timeline) run(ctx context.Context, every time.Duration) {
	ctx, tl.cancel = context.WithCancel(ctx)
	tl.done = make(chan struct{})
	go func() {
		defer close(tl.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			tl.take(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// stop ends the sampling with one last sample and returns them all.
func (tl *timeline) stop(ctx context.Context) []sample {
	tl.cancel()
	<-tl.done
	tl.take(ctx)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.samples
}

// take adds one sample. The levels are the record's (the database is up
// through every fault the sale plays), read with a short deadline.
func (tl *timeline) take(ctx context.Context) {
	s := sample{at: time.Since(tl.start).Seconds(), available: make([]int64, len(tl.skus))}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 250*time.Millisecond)
	for i, sku := range tl.skus {
		s.available[i] = -1
		if lv, err := tl.sys.record.Levels(rctx, sku); err == nil {
			s.available[i] = lv.Available
		}
	}
	cancel()
	s.attempts = make([]int64, len(outcomes))
	s.attempts[0] = tl.st.orders.Load()
	tl.st.mu.Lock()
	for i, r := range reasons {
		s.attempts[i+1] = tl.st.rejected[r]
	}
	tl.st.mu.Unlock()
	s.queue = tl.q.inFlight()
	s.reclaimed = [2]int64{tl.reclaimed.gate.Load(), tl.reclaimed.record.Load()}
	s.breaker = tl.sys.breaker.state.Load()
	s.redisDown = tl.sys.breaker.redisDown.Load()
	tl.mu.Lock()
	tl.samples = append(tl.samples, s)
	tl.mu.Unlock()
}
