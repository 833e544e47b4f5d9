package redisstock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/observe"
)

// maxFlying is how many batches one Store keeps in flight at once. Two let
// the next batch fill while the server runs one and the client reads the
// other's replies.
const maxFlying = 2

// batcher coalesces concurrent Deducts into one script call (group
// commit): a caller that finds fewer than maxFlying batches in flight is
// sent at once, alone; the others queue, and when a batch ends the oldest
// queued callers (up to max) leave together in the next one.
//
// A batch is reported to the Observer on the goroutine of one of its
// callers, never while it holds an in-flight slot: whatever the hook does
// (a panic included), the slot is free and the batch's other callers are
// answered (see answer).
type batcher struct {
	s   *Store
	max int // orders per batch
	// run sends one batch, sets the outcome (err) of each call in it and
	// returns the error the whole call failed with, if it did; send then
	// hands the calls their outcomes (see answer).
	run func(ctx context.Context, batch []*call) error
	// quiet batches are not reported to the Observer: the binds of a
	// Cluster's Deducts, a stage before the batches of their takes.
	quiet bool

	mu     sync.Mutex
	queue  []*call
	flying int
}

// call is one order waiting for, or inside, a batch.
type call struct {
	ctx context.Context
	o   prepared // on a single server: the order's part of the script call
	// On a Redis Cluster: the attempt, and once its batch is sent, the
	// replies of its bind and of its part of the deduct script.
	a     *attempt
	bind  *redis.Cmd
	first *redis.Cmd
	// take is the call of the attempt's take, queued by its bind's batch
	// when the bind said "new" or "same" (nil: the caller queues it); set
	// under the binds' batcher.mu, and then the caller waits for it.
	take *call
	sent bool      // taken into a batch; guarded by batcher.mu
	left bool      // its caller stopped waiting once it was sent; guarded by batcher.mu
	at   time.Time // when it was queued, if batches are observed
	// report is the batch's report when this call's caller makes it: set
	// under batcher.mu before done is closed (see answer).
	report *report
	done   chan struct{} // closed when err is set
	err    error
}

// report is a batch that ran, for the Observer, with its calls.
type report struct {
	b     observe.Batch
	calls []*call
}

// do runs c's order in a batch and returns its outcome. A caller whose ctx
// ends while it is queued leaves with nothing sent; once its order is sent,
// it gets the order's outcome, or stock.ErrUnknownOutcome if ctx ends
// first.
func (b *batcher) do(ctx context.Context, c *call) error {
	if err := ctx.Err(); err != nil {
		return withCtx(ctx, notSent(err))
	}
	c.done = make(chan struct{})
	if b.s.obs.Batching() {
		c.at = time.Now()
	}
	b.mu.Lock()
	if b.flying < maxFlying {
		b.flying++
		c.sent = true
		b.mu.Unlock()
		b.send(ctx, []*call{c})
		b.next() // the slot is free before the batch is reported
		return b.result(c)
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	return b.wait(ctx, c)
}

// enqueue queues the calls cs together, behind any queued before them, and
// starts a batch for each free in-flight slot; their callers then wait
// with b.wait. So the orders of one earlier stage (the binds of one
// batch) go on together, not one by one as each caller wakes. A call
// whose at is set keeps it: its wait counts from the earlier stage's
// queue.
func (b *batcher) enqueue(cs []*call) {
	var at time.Time
	if b.s.obs.Batching() {
		at = time.Now()
	}
	for _, c := range cs {
		c.done = make(chan struct{})
		if c.at.IsZero() {
			c.at = at
		}
	}
	var start [][]*call
	b.mu.Lock()
	b.queue = append(b.queue, cs...)
	for b.flying < maxFlying && len(b.queue) > 0 {
		b.flying++
		start = append(start, b.take())
	}
	b.mu.Unlock()
	for _, batch := range start {
		go b.drain(batch)
	}
}

// wait waits for the outcome of c, queued (by do or enqueue), as do
// describes.
func (b *batcher) wait(ctx context.Context, c *call) error {
	select {
	case <-c.done:
		return b.result(c)
	case <-ctx.Done():
	}
	b.mu.Lock()
	switch {
	case !c.sent:
		b.queue = slices.DeleteFunc(b.queue, func(q *call) bool { return q == c })
		b.mu.Unlock()
		return withCtx(ctx, notSent(ctx.Err()))
	case c.report != nil || c.take != nil:
		// Its caller is the one to report its batch, which the batch's
		// other calls wait for, or has its take queued, which needs its
		// caller: it stays for its outcome, known by now (done is being
		// closed).
		b.mu.Unlock()
		<-c.done
		return b.result(c)
	}
	c.left = true
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	default:
		return &outcomeError{err: ctx.Err()}
	}
}

// result returns the outcome of c, whose done is closed, once its caller
// has reported the batch if it is the one to.
func (b *batcher) result(c *call) error {
	if c.report != nil {
		c.report.send(c.ctx, b.s.obs, c)
	}
	return c.err
}

// send runs batch with b.run and hands its calls their outcomes.
func (b *batcher) send(ctx context.Context, batch []*call) {
	if b.quiet || !b.s.obs.Batching() {
		_ = b.run(ctx, batch)
		b.answer(batch, nil)
		return
	}
	start := time.Now()
	err := b.run(ctx, batch)
	b.answer(batch, &report{calls: batch, b: observe.Batch{Component: "redisstock", Op: observe.OpDeduct,
		Size: len(batch), Wait: start.Sub(batch[0].at), Duration: time.Since(start), Err: err}})
}

// answer hands the calls of batch, which ran, their outcomes. Without a
// report it closes every done channel. With one, the first call whose
// caller still waits gets it: only its done is closed here, and its caller
// reports the batch on its own goroutine (result), then closes the
// others', so the batch is reported before any of its calls returns. A
// batch whose callers have all left is reported here, on the goroutine
// that ran it.
func (b *batcher) answer(batch []*call, r *report) {
	if r == nil {
		for _, c := range batch {
			close(c.done)
		}
		return
	}
	b.mu.Lock()
	i := slices.IndexFunc(batch, func(c *call) bool { return !c.left })
	if i >= 0 {
		batch[i].report = r
	}
	b.mu.Unlock()
	if i < 0 {
		r.send(batch[0].ctx, b.s.obs, nil)
		return
	}
	close(batch[i].done)
}

// send reports r, then closes the done channels of its calls other than
// by (whose caller reports it), even if the hook panics.
func (r *report) send(ctx context.Context, obs *observe.Observer, by *call) {
	defer func() {
		for _, c := range r.calls {
			if c != by {
				close(c.done)
			}
		}
	}()
	obs.SendBatch(ctx, r.b)
}

// next hands the queue, if any, to a new goroutine that sends it batch
// after batch until it is empty, or gives back the in-flight slot.
func (b *batcher) next() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if batch != nil {
		go b.drain(batch)
	}
}

// drain sends batch, then each batch the queue holds after it.
func (b *batcher) drain(batch []*call) {
	for batch != nil {
		ctxs := make([]context.Context, len(batch))
		for i, c := range batch {
			ctxs[i] = c.ctx
		}
		ctx, cancel := callctx.Shared(ctxs) // one call made for every caller in batch
		b.send(ctx, batch)
		cancel()
		b.mu.Lock()
		batch = b.take()
		b.mu.Unlock()
	}
}

// take removes up to max queued calls and marks them sent; with none
// queued it releases the caller's in-flight slot and returns nil. b.mu is
// held.
func (b *batcher) take() []*call {
	n := min(len(b.queue), b.max)
	if n == 0 {
		b.flying--
		return nil
	}
	batch := make([]*call, n)
	copy(batch, b.queue)
	for _, c := range batch {
		c.sent = true
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}
