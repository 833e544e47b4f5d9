package observe

import (
	"context"
	"errors"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Observer receives the library's events. Every field is optional; the
// zero value reports nothing. An Observer is copied into the Configs that
// take it, so set its funcs before passing it.
type Observer struct {
	// Begin, if set, is called as a call starts. The context it returns is
	// the one the call runs in (return ctx itself to change nothing).
	Begin func(ctx context.Context, c Call) context.Context
	// End, if set, is called as the call returns, with the context Begin
	// returned.
	End func(ctx context.Context, c Call, r Result)
	// Batch, if set, is called after each batch of calls is sent, before
	// any call in the batch returns, on the goroutine of one call of the
	// batch and with its context (see the package doc).
	Batch func(ctx context.Context, b Batch)
	// Reclaim, if set, is called after each reclaim pass.
	Reclaim func(ctx context.Context, r Reclaim)
	// Breaker, if set, is called as each breaker is made (From "") and on
	// each state change (and each ramp step), synchronously under the breaker's lock: never block in
	// it, and never call the degrade Manager from it.
	Breaker func(b Breaker)
	// Correction, if set, is called with each reconcile finding reported.
	Correction func(c Correction)
	// Limit, if set, is called with each limiter decision.
	Limit func(ctx context.Context, l Limit)
	// Handoff, if set, is called by a handoff.Consumer as each delivery it
	// settled ends: acknowledged, or dead-lettered.
	Handoff func(ctx context.Context, h Handoff)
}

// Op names an operation.
type Op string

// The operations Call, Batch and Reclaim report.
const (
	OpDeduct    Op = "deduct"
	OpConfirm   Op = "confirm"
	OpRevert    Op = "revert"
	OpRestock   Op = "restock"
	OpPutOnSale Op = "put_on_sale"
	OpReclaim   Op = "reclaim"
	// OpRevertItems is a partial revert (stock.PartialReverter).
	OpRevertItems Op = "revert_items"
	// OpExtendHold is a hold's extension (stock.HoldExtender).
	OpExtendHold Op = "extend_hold"
)

// Call is one call of a Manager method, as it starts.
type Call struct {
	// Component is the package that ran it: "memstock", "redisstock",
	// "sqlstock", "tiered" or "degrade".
	Component string
	Op        Op
	// Items is the number of order lines (Deduct), 1 for a call on one SKU
	// (Restock, PutOnSale), 0 otherwise.
	Items int
	// Start is when the call began (the wall clock).
	Start time.Time
	// Nested reports that the call runs on behalf of another call tracked
	// in its context: a tiered Manager's call to its gate or record, a
	// degrade Manager's call to its flow. The application's own calls are
	// not nested, so counting only those counts each order operation
	// once, however many layers it passes through.
	Nested bool
}

// Result is how a call ended.
type Result struct {
	Outcome  Outcome
	Err      error // nil when Outcome is OK
	Duration time.Duration
}

// Batch is one group of calls sent together.
type Batch struct {
	// Component is "redisstock" (one script call for many orders) or
	// "sqlstock" (one transaction for many orders).
	Component string
	Op        Op
	// Size is the number of calls in the batch.
	Size int
	// Wait is how long the batch's oldest call waited before the batch was
	// sent.
	Wait time.Duration
	// Duration is how long the batch took once sent.
	Duration time.Duration
	// Err is the error the whole batch failed with, if any (each call's own
	// outcome is in its Result).
	Err error
}

// Reclaim is one reclaim pass (one ReclaimExpired call).
type Reclaim struct {
	Component string
	// Orders, Lines and Units are what the pass returned.
	Orders, Lines int
	Units         int64
	// Lag is how long past its deadline the oldest hold the pass found due
	// was (by the store's clock); 0 when none was due.
	Lag      time.Duration
	Duration time.Duration
	Err      error
}

// Breaker is one state change of a degrade breaker.
type Breaker struct {
	// Name is the breaker's name: the SKU for per-SKU breakers, "" for the
	// shared one.
	Name string
	// From and To are degrade's State names: "primary", "degraded",
	// "recalibrating" or "ramping". From is "" in the report of a breaker
	// as it is made (degrade.New makes the shared one, a per-SKU one is
	// made when its SKU is first seen): To is then its first state, so a
	// breaker is seen before it ever changes.
	From, To string
	// Share is the share of traffic the primary gets in state To (0 to 1).
	Share float64
	// Err is the error that caused the change, if one did.
	Err error
}

// Correction is one reconcile finding that was reported (reconcile.Correction).
type Correction struct {
	SKU string
	// Action is reconcile's Action name: "corrected", "rebuilt",
	// "restocked", "ended", "left", "stale", "failed", "dry-run", and
	// from a warm-up "refused" and "mismatch".
	Action string
	// Delta is the change Redis needed (applied or not).
	Delta int64
	// Ended is the units of Redis's holds whose orders the database had
	// returned, which the pass reverted at Redis ("ended"; with "dry-run",
	// would revert). They are no part of Delta.
	Ended int64
	Err   error
}

// Limit is one limiter decision.
type Limit struct {
	// Limiter is "local", "redis" or "composite".
	Limiter string
	// N is the number of events asked for.
	N       int
	Allowed bool
	// Err is set when no decision could be made (then Allowed is false).
	Err      error
	Duration time.Duration
}

// Handoff is one delivery of a queued hand-off (package handoff) that
// ended: its order was settled, or its message dead-lettered.
type Handoff struct {
	// Lag is from the message's publish to the end of its settling (the
	// publisher's clock against the consumer's).
	Lag time.Duration
	// Expired reports that the order's gate hold had ended: Settle
	// answered stock.ErrHoldExpired (the order expired in the queue; the
	// settle returned it through the refusal path), or the message was
	// dead-lettered past its Deadline because the gate answered that it
	// no longer holds the order (or could not answer until stock.MaxHoldTTL
	// after the message was sent). Any other delivery is not expired: one
	// delivered after the deadline it was published with whose hold was
	// extended since is not, whatever the record answers.
	Expired bool
	// Attempt is the delivery's number: 1 for the message's first.
	Attempt int
	// Outcome is the class of Settle's answer; Failed, with
	// DeadLettered, for a message that could not be settled.
	Outcome Outcome
	// DeadLettered reports that the message went to the dead letters.
	DeadLettered bool
}

// SendHandoff reports h if the Handoff hook is set.
func (o *Observer) SendHandoff(ctx context.Context, h Handoff) {
	if o != nil && o.Handoff != nil {
		o.Handoff(ctx, h)
	}
}

// Outcome is the class of a call's result.
type Outcome uint8

// The outcome classes, from stock's errors.
const (
	OK             Outcome = iota
	SoldOut                // stock.ErrSoldOut
	LimitReached           // stock.ErrLimitReached
	UnknownSKU             // stock.ErrUnknownSKU
	UnknownOrder           // stock.ErrUnknownOrder
	Conflict               // stock.ErrConflict
	Expired                // stock.ErrHoldExpired
	Closed                 // stock.ErrOrderClosed
	Confirmed              // stock.ErrOrderConfirmed
	HoldTooLong            // stock.ErrHoldTooLong
	ExceedsOrder           // stock.ErrExceedsOrder
	Invalid                // stock.ErrInvalid
	UnknownOutcome         // stock.ErrUnknownOutcome: the call may have applied
	Contention             // stock.ErrContention
	Unavailable            // stock.ErrUnavailable
	Canceled               // the caller's context ended before anything was sent
	Failed                 // another infrastructure error
)

var outcomeNames = [...]string{
	OK: "ok", SoldOut: "sold_out", LimitReached: "limit", UnknownSKU: "unknown_sku",
	UnknownOrder: "unknown_order", Conflict: "conflict", Expired: "expired", Closed: "closed",
	Confirmed: "confirmed", HoldTooLong: "hold_too_long", ExceedsOrder: "exceeds_order",
	Invalid: "invalid", UnknownOutcome: "unknown_outcome", Contention: "contention",
	Unavailable: "unavailable", Canceled: "canceled", Failed: "error",
}

// String is the outcome's name as metrics label it: "ok", "sold_out",
// "limit", "unknown_sku", "unknown_order", "conflict", "expired", "closed",
// "confirmed", "hold_too_long", "exceeds_order", "invalid", "unknown_outcome", "contention", "unavailable", "canceled",
// "error".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "error"
}

// Business reports whether the outcome is a final answer about the order
// (sold out, limit, unknown SKU or order, conflict, expired, closed,
// confirmed, hold too long, exceeds order, invalid) rather than success or a failure to answer.
func (o Outcome) Business() bool { return o >= SoldOut && o <= Invalid }

// classes maps stock's errors to their classes, in the order Classify
// tries them: an unknown outcome first (it may wrap any other error).
var classes = []struct {
	err error
	o   Outcome
}{
	{stock.ErrUnknownOutcome, UnknownOutcome},
	{stock.ErrContention, Contention},
	{stock.ErrUnavailable, Unavailable},
	{stock.ErrSoldOut, SoldOut},
	{stock.ErrLimitReached, LimitReached},
	{stock.ErrUnknownSKU, UnknownSKU},
	{stock.ErrUnknownOrder, UnknownOrder},
	{stock.ErrConflict, Conflict},
	{stock.ErrHoldExpired, Expired},
	{stock.ErrOrderClosed, Closed},
	{stock.ErrOrderConfirmed, Confirmed},
	{stock.ErrHoldTooLong, HoldTooLong},
	{stock.ErrExceedsOrder, ExceedsOrder},
	{stock.ErrInvalid, Invalid},
	{context.Canceled, Canceled},
	{context.DeadlineExceeded, Canceled},
}

// Classify returns err's outcome class: OK for nil, Failed for an error
// none of stock's errors (or a context error) matches.
func Classify(err error) Outcome {
	if err == nil {
		return OK
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.o
		}
	}
	return Failed
}

// Tracker is a call in progress; see Observer.Track. The zero Tracker
// reports nothing.
type Tracker struct{ p *tracked }

type tracked struct {
	o   *Observer
	ctx context.Context
	c   Call
}

// Track starts a call of op by component over items order lines. It
// returns the context the call should run in and a Tracker whose Done
// reports the end. The context is marked as a tracked call's, so the calls
// made in it are Nested, and is the one Begin derived, if it did. With neither
// Begin nor End set it returns ctx and the zero Tracker, reads no clock
// and allocates nothing.
func (o *Observer) Track(ctx context.Context, component string, op Op, items int) (context.Context, Tracker) {
	if o == nil || (o.Begin == nil && o.End == nil) {
		return ctx, Tracker{}
	}
	return o.track(ctx, component, op, items)
}

func (o *Observer) track(ctx context.Context, component string, op Op, items int) (context.Context, Tracker) {
	c := Call{Component: component, Op: op, Items: items, Start: time.Now()}
	if ctx.Value(trackedKey{}) != nil {
		c.Nested = true
	} else {
		ctx = context.WithValue(ctx, trackedKey{}, true)
	}
	if o.Begin != nil {
		if derived := o.Begin(ctx, c); derived != nil {
			ctx = derived
		}
	}
	return ctx, Tracker{&tracked{o: o, ctx: ctx, c: c}}
}

// trackedKey marks a context as that of a tracked call: the calls made in
// it are nested (Call.Nested).
type trackedKey struct{}

// Done reports the call's end with its error (nil for success).
func (t Tracker) Done(err error) {
	if t.p != nil && t.p.o.End != nil {
		t.p.done(err)
	}
}

func (t *tracked) done(err error) {
	t.o.End(t.ctx, t.c, Result{Outcome: Classify(err), Err: err, Duration: time.Since(t.c.Start)})
}

// Batching reports whether the Batch hook is set (so that a caller reads
// the clock for a batch only when it is).
func (o *Observer) Batching() bool { return o != nil && o.Batch != nil }

// SendBatch reports b if the Batch hook is set.
func (o *Observer) SendBatch(ctx context.Context, b Batch) {
	if o != nil && o.Batch != nil {
		o.Batch(ctx, b)
	}
}

// Reclaiming reports whether the Reclaim hook is set.
func (o *Observer) Reclaiming() bool { return o != nil && o.Reclaim != nil }

// PassDone reports a reclaim pass that started at start (the wall clock)
// and returned lines, the oldest due hold having a deadline of oldest
// (zero when none was due) by a store clock that reads now.
func (o *Observer) PassDone(ctx context.Context, component string, start time.Time, lines []stock.Reclaimed, oldest, now time.Time, err error) {
	if o == nil || o.Reclaim == nil {
		return
	}
	r := Reclaim{Component: component, Lines: len(lines), Duration: time.Since(start), Err: err}
	orders := make(map[string]bool, len(lines))
	for _, l := range lines {
		orders[l.OrderID] = true
		r.Units += l.Qty
	}
	r.Orders = len(orders)
	if !oldest.IsZero() && now.After(oldest) {
		r.Lag = now.Sub(oldest)
	}
	o.Reclaim(ctx, r)
}
