package observe

import (
	"context"
	"sync"
)

// Recorder keeps every event an Observer receives, for tests and
// debugging. Its zero value is ready to use and it is safe for concurrent
// use.
type Recorder struct {
	mu          sync.Mutex
	calls       []Ended
	batches     []Batch
	reclaims    []Reclaim
	breakers    []Breaker
	corrections []Correction
	limits      []Limit
	handoffs    []Handoff
}

// Ended is a call as it ended: what Begin saw and what End reported.
type Ended struct {
	Call
	Result
	// Depth is how many calls of this Recorder's Observer enclosed this
	// one (0 for a call made by the application): a tiered Manager's call
	// to its gate has depth 1.
	Depth int
}

type depthKey struct{ r *Recorder }

// Observer returns an Observer that records into r.
func (r *Recorder) Observer() Observer {
	return Observer{
		Begin: func(ctx context.Context, c Call) context.Context {
			d, _ := ctx.Value(depthKey{r}).(int)
			return context.WithValue(ctx, depthKey{r}, d+1)
		},
		End: func(ctx context.Context, c Call, res Result) {
			d, _ := ctx.Value(depthKey{r}).(int)
			r.mu.Lock()
			r.calls = append(r.calls, Ended{Call: c, Result: res, Depth: d - 1})
			r.mu.Unlock()
		},
		Batch:      func(_ context.Context, b Batch) { r.add(func() { r.batches = append(r.batches, b) }) },
		Reclaim:    func(_ context.Context, x Reclaim) { r.add(func() { r.reclaims = append(r.reclaims, x) }) },
		Breaker:    func(b Breaker) { r.add(func() { r.breakers = append(r.breakers, b) }) },
		Correction: func(c Correction) { r.add(func() { r.corrections = append(r.corrections, c) }) },
		Limit:      func(_ context.Context, l Limit) { r.add(func() { r.limits = append(r.limits, l) }) },
		Handoff:    func(_ context.Context, h Handoff) { r.add(func() { r.handoffs = append(r.handoffs, h) }) },
	}
}

func (r *Recorder) add(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
}

// Calls returns the calls ended so far, in the order they ended.
func (r *Recorder) Calls() []Ended {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Ended(nil), r.calls...)
}

// Batches returns the batches reported so far.
func (r *Recorder) Batches() []Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Batch(nil), r.batches...)
}

// Reclaims returns the reclaim passes reported so far.
func (r *Recorder) Reclaims() []Reclaim {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Reclaim(nil), r.reclaims...)
}

// Breakers returns the breaker state changes reported so far.
func (r *Recorder) Breakers() []Breaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Breaker(nil), r.breakers...)
}

// Corrections returns the reconcile findings reported so far.
func (r *Recorder) Corrections() []Correction {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Correction(nil), r.corrections...)
}

// Limits returns the limiter decisions reported so far.
func (r *Recorder) Limits() []Limit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Limit(nil), r.limits...)
}

// Handoffs returns the hand-off deliveries reported so far.
func (r *Recorder) Handoffs() []Handoff {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Handoff(nil), r.handoffs...)
}

// Reset forgets every event recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.batches, r.reclaims, r.breakers, r.corrections, r.limits, r.handoffs = nil, nil, nil, nil, nil, nil, nil
}
