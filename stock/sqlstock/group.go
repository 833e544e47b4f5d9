package sqlstock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// maxFlying is how many transactions one lane of a Store keeps in flight
// at once. Two let the next group write its ledger lines while the other
// holds the stock row until its COMMIT returns. SQLite has one writer: a
// second transaction would only wait for the write lock, so it keeps one.
const maxFlying = 2

// grouper coalesces concurrent Atomic Deducts of the same SKUs into one
// transaction (group commit). Orders are sorted into lanes by their SKU
// set (on SQLite, which has one writer, all share one lane). A caller that finds fewer than maxFlying transactions in flight in
// its lane goes at once, alone, in a transaction of its own; the others
// queue, and when a transaction ends the oldest queued callers (up to
// max) go together in the next one. So an idle Store, or one whose
// orders spread over many SKUs, adds no latency and writes as it did
// without grouping; a hot SKU gets one transaction per group instead of
// one per order.
type grouper struct {
	s      *Store
	max    int // orders per group
	flying int // transactions in flight per lane: maxFlying, or 1 on SQLite

	mu    sync.Mutex
	lanes map[string]*lane

	groups atomic.Int64 // transactions of more than one order (for tests)
}

// lane is the queue of one SKU set.
type lane struct {
	queue  []*gcall
	flying int
}

// gcall is one order waiting for, or inside, a group.
type gcall struct {
	ctx   context.Context
	o     stock.Order
	items []stock.Item // sorted
	sent  bool         // taken into a group; guarded by grouper.mu
	// written: its group is about to send it (nothing of it is sent
	// before); guarded by grouper.mu.
	written bool
	left    bool      // its caller stopped waiting once it was sent; guarded by grouper.mu
	at      time.Time // when it was queued
	// report is the group's report when this call's caller makes it: set
	// under grouper.mu before done is closed (see answer).
	report *groupReport
	done   chan struct{} // closed when res is set
	res    error         // what the group says; see settleCall
}

// groupReport is a group that ran, for the Observer, with its calls.
type groupReport struct {
	b     observe.Batch
	calls []*gcall
}

// errQueued is the last failure of a grouped Deduct that left the queue
// when its two LockWaits were up before its group began (see do).
var errQueued = errors.New("sqlstock: queued for a group for two LockWaits")

// errSplit is a group's answer to an order it did not decide: the order
// runs again in a transaction of its own.
var errSplit = errors.New("sqlstock: group split")

// laneKey names the lane of sorted items: their SKUs, or on SQLite, which
// has one writer whatever the SKUs, one lane for all.
func (g *grouper) laneKey(items []stock.Item) string {
	switch {
	case g.s.d == SQLite:
		return ""
	case len(items) == 1:
		return items[0].SKU
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.SKU)
		b.WriteByte(0)
	}
	return b.String()
}

// do deducts o in a group and returns its outcome. A caller whose ctx
// ends while it is queued, or taken into a group that has not begun to
// write, leaves with its context's error and nothing sent (the group
// leaves its order out); once its group writes, it gets the order's
// outcome, or stock.ErrUnknownOutcome if ctx ends first. A call's two
// LockWaits count from when it queued: one whose group has not begun to
// write by then leaves the same way, with stock.ErrContention, so a lane
// whose transactions wait for a row does not keep it waiting for every
// group ahead of it in turn.
//
// A transaction is reported to the Observer on the goroutine of one of
// its callers, never while it holds the lane's in-flight slot: whatever
// the hook does (a panic included), the slot is free and the group's
// other callers are answered (see answer).
func (g *grouper) do(ctx context.Context, o stock.Order, items []stock.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := g.laneKey(items)
	c := &gcall{ctx: ctx, o: o, items: items, done: make(chan struct{}), at: time.Now()}
	g.mu.Lock()
	l := g.lanes[key]
	if l == nil {
		l = &lane{}
		g.lanes[key] = l
	}
	if l.flying < g.flying {
		l.flying++
		c.sent = true
		g.mu.Unlock()
		if !g.s.obs.Batching() {
			err := g.s.deductOne(ctx, o, items)
			g.next(key, l)
			return err
		}
		start := time.Now()
		err := g.s.deductOne(ctx, o, items)
		b := g.batch(1, start.Sub(c.at), start, err)
		g.next(key, l) // the slot is free before the transaction is reported
		g.s.obs.SendBatch(ctx, b)
		return err
	}
	l.queue = append(l.queue, c)
	g.mu.Unlock()

	// The call's two LockWaits count from when it queued: past them, a
	// call whose group has not begun to write leaves as one whose context
	// ended does, with nothing sent.
	settled := time.NewTimer(time.Until(c.at.Add(settledWaits * g.s.lockWait())))
	defer settled.Stop()
	var leave error
	select {
	case <-c.done:
		return g.result(c)
	case <-ctx.Done():
		leave = ctx.Err()
	case <-settled.C:
		leave = &ContentionError{Op: "deduct", Attempts: 0, Last: errQueued}
	}
	g.mu.Lock()
	switch {
	case !c.sent:
		l.queue = slices.DeleteFunc(l.queue, func(q *gcall) bool { return q == c })
		g.mu.Unlock()
		return leave
	case !c.written:
		c.left = true // its group leaves it out
		g.mu.Unlock()
		return leave
	case ctx.Err() == nil:
		// Its group writes: it waits for the outcome (the group's
		// statements end within one LockWait of its BEGIN), or for its
		// context.
		g.mu.Unlock()
		select {
		case <-c.done:
			return g.result(c)
		case <-ctx.Done():
		}
		g.mu.Lock()
	}
	switch {
	case c.report != nil:
		// Its group ran and its caller is the one to report it: it stays
		// for its outcome, which is known (done is being closed).
		g.mu.Unlock()
		<-c.done
		return g.result(c)
	}
	c.left = true
	g.mu.Unlock()
	select {
	case <-c.done:
		return g.s.settleCall(c)
	default:
		return &UnknownOutcomeError{Op: "deduct", Attempts: 1, Last: ctx.Err(), Ctx: ctx.Err()}
	}
}

// result returns the outcome of c, whose done is closed, once its caller
// has reported the group if it is the one to.
func (g *grouper) result(c *gcall) error {
	if c.report != nil {
		c.report.send(c.ctx, g.s.obs, c)
	}
	return g.s.settleCall(c)
}

// next hands the lane's queue, if any, to a new goroutine that sends it
// group after group until it is empty, or gives back the in-flight slot.
func (g *grouper) next(key string, l *lane) {
	g.mu.Lock()
	batch := g.take(key, l)
	g.mu.Unlock()
	if batch != nil {
		go g.drain(key, l, batch)
	}
}

func (g *grouper) drain(key string, l *lane, batch []*gcall) {
	for batch != nil {
		g.mu.Lock()
		batch = slices.DeleteFunc(batch, func(c *gcall) bool { return c.left })
		for _, c := range batch {
			c.written = true
		}
		if len(batch) == 0 {
			batch = g.take(key, l)
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()
		ctx, cancel := groupContext(batch)
		var r *groupReport
		if g.s.obs.Batching() {
			start := time.Now()
			g.s.deductGroup(ctx, batch)
			r = &groupReport{calls: batch, b: g.batch(len(batch), start.Sub(batch[0].at), start, batch[0].res)}
		} else {
			g.s.deductGroup(ctx, batch)
		}
		cancel()
		g.answer(batch, r)
		g.mu.Lock()
		batch = g.take(key, l)
		g.mu.Unlock()
	}
}

// answer hands the calls of batch, which ran, their outcomes. Without a
// report it closes every done channel. With one, the first call whose
// caller still waits gets it: only its done is closed here, and its caller
// reports the group on its own goroutine (result), then closes the
// others', so the group is reported before any of its calls returns. A
// group whose callers have all left is reported here, on the goroutine
// that ran it.
func (g *grouper) answer(batch []*gcall, r *groupReport) {
	if r == nil {
		for _, c := range batch {
			close(c.done)
		}
		return
	}
	g.mu.Lock()
	i := slices.IndexFunc(batch, func(c *gcall) bool { return !c.left })
	if i >= 0 {
		batch[i].report = r
	}
	g.mu.Unlock()
	if i < 0 {
		r.send(batch[0].ctx, g.s.obs, nil)
		return
	}
	close(batch[i].done)
}

// send reports r, then closes the done channels of its calls other than
// by (whose caller reports it), even if the hook panics.
func (r *groupReport) send(ctx context.Context, obs *observe.Observer, by *gcall) {
	defer func() {
		for _, c := range r.calls {
			if c != by {
				close(c.done)
			}
		}
	}()
	obs.SendBatch(ctx, r.b)
}

// batch is the report of a transaction of size orders that started at
// start after its oldest order waited wait; err is its first order's
// result, reported as the group's error when it is an infrastructure one.
func (g *grouper) batch(size int, wait time.Duration, start time.Time, err error) observe.Batch {
	b := observe.Batch{Component: "sqlstock", Op: observe.OpDeduct, Size: size, Wait: wait, Duration: time.Since(start)}
	if o := observe.Classify(err); o != observe.OK && !o.Business() && !errors.Is(err, errSplit) {
		b.Err = err
	}
	return b
}

// take removes up to max queued calls of the lane and marks them sent;
// with none queued it releases the caller's in-flight slot (and forgets an
// idle lane) and returns nil. g.mu is held.
func (g *grouper) take(key string, l *lane) []*gcall {
	n := min(len(l.queue), g.max)
	if n == 0 {
		if l.flying--; l.flying == 0 {
			delete(g.lanes, key)
		}
		return nil
	}
	batch := slices.Clone(l.queue[:n])
	for _, c := range batch {
		c.sent = true
	}
	rest := copy(l.queue, l.queue[n:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	return batch
}

// settleCall turns what the group said of c into c's outcome, in c's own
// goroutine and context. A refusal is checked against the ledger, as a
// refusal of a lone Deduct is (a repeated ID answers from there); an
// order the group did not decide runs again alone; an order whose
// group's COMMIT may have applied is run again to learn its outcome from
// the ledger by its own ID, and stays stock.ErrUnknownOutcome until that
// answers.
func (s *Store) settleCall(c *gcall) error {
	ctx, o, items := c.ctx, c.o, c.items
	again := func(ctx context.Context) error { return s.attemptOne(ctx, o, items) }
	start := c.at
	if start.IsZero() {
		start = time.Now()
	}
	switch err := c.res; {
	case err == nil:
		return nil
	case errors.Is(err, errSplit):
		// Run alone, within what is left of the call's time: it may have
		// waited for the group ahead of it and in its own.
		return s.retryFrom(ctx, "deduct", true, start, errRetry, again)
	case stock.IsBusiness(err):
		actx, cancel := s.attemptCtx(ctx, start, false)
		defer cancel()
		return s.retryFrom(ctx, "deduct", true, start, s.answer(actx, o, items, err, false), again)
	default: // *maybeApplied, or a lock wait or deadlock of the group
		return s.retryFrom(ctx, "deduct", true, start, err, again)
	}
}

// groupContext is the context of one call made for every caller in batch
// (see callctx.Shared).
func groupContext(batch []*gcall) (context.Context, context.CancelFunc) {
	ctxs := make([]context.Context, len(batch))
	for i, c := range batch {
		ctxs[i] = c.ctx
	}
	return callctx.Shared(ctxs)
}
