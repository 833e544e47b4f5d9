package otelstock

import (
	"context"

	"github.com/stockguard/stockguard/observe"
)

// BreakerStates are degrade's state names, each a stockguard.breaker.state
// value of stockguard.breaker.status.
var BreakerStates = []string{"primary", "degraded", "recalibrating", "ramping"}

// reclaim counts a reclaim pass and what it returned, and, for a pass that
// did not fail, records its lag.
func (a *Adapter) reclaim(ctx context.Context, r observe.Reclaim) {
	opt := a.opt(setKey{kind: kindReclaim, a: r.Component})
	outcome := observe.Classify(r.Err).String()
	a.reclaimPasses.Add(ctx, 1, a.opt(setKey{kindReclaimPass, r.Component, outcome, ""}))
	a.reclaimOrders.Add(ctx, int64(r.Orders), opt)
	a.reclaimUnits.Add(ctx, r.Units, opt)
	if r.Err == nil {
		a.reclaimLag.Record(ctx, r.Lag.Seconds(), opt)
	}
}

// breaker records a breaker's state, as 1 for its state and 0 for the
// others, and its share, and counts the change. The report of a breaker as
// it is made (From "") is no change. It runs under the breaker's lock: it
// only records.
func (a *Adapter) breaker(b observe.Breaker) {
	ctx := context.Background()
	for _, s := range BreakerStates {
		v := int64(0)
		if s == b.To {
			v = 1
		}
		a.breakerStatus.Record(ctx, v, a.with(KeyBreaker.String(b.Name), KeyBreakerState.String(s)))
	}
	a.breakerShare.Record(ctx, b.Share, a.with(KeyBreaker.String(b.Name)))
	if b.From != "" {
		a.breakerChanges.Add(ctx, 1, a.with(KeyBreaker.String(b.Name), KeyBreakerFrom.String(b.From), KeyBreakerTo.String(b.To)))
	}
}

// correction counts a reconcile finding and its units: the size of its
// change and the units of the holds the pass ended at Redis
// (observe.Correction.Ended, no part of the change).
func (a *Adapter) correction(c observe.Correction) {
	ctx := context.Background()
	opt := a.with(KeyAction.String(c.Action))
	a.corrections.Add(ctx, 1, opt)
	d := c.Delta
	if d < 0 {
		d = -d
	}
	a.correctedUnits.Add(ctx, d+c.Ended, opt)
}

// limit counts a limiter decision by what it decided ("allowed",
// "refused", or "error" with error.type when none could be made) and
// records its duration.
func (a *Adapter) limit(ctx context.Context, l observe.Limit) {
	decision, class := "refused", ""
	switch {
	case l.Err != nil:
		decision, class = "error", observe.Classify(l.Err).String()
	case l.Allowed:
		decision = "allowed"
	}
	a.decisions.Add(ctx, 1, a.opt(setKey{kindLimitDecision, l.Limiter, decision, class}))
	a.limitDuration.Record(ctx, l.Duration.Seconds(), a.opt(setKey{kind: kindLimit, a: l.Limiter}))
}

// handoff counts a hand-off delivery that ended, by outcome, records its
// lag, and counts it expired in the queue if it was.
func (a *Adapter) handoff(ctx context.Context, h observe.Handoff) {
	outcome := h.Outcome.String()
	if h.DeadLettered {
		outcome = "dead_lettered"
	}
	a.handoffs.Add(ctx, 1, a.opt(setKey{kind: kindHandoff, a: outcome}))
	plain := a.opt(setKey{kind: kindHandoff})
	a.handoffLag.Record(ctx, h.Lag.Seconds(), plain)
	if h.Expired {
		a.handoffExpired.Add(ctx, 1, plain)
	}
}
