package otelstock

import (
	"context"

	"github.com/stockguard/stockguard/observe"
)

// BreakerState is the value stockguard.breaker.state records for one of
// degrade's state names: 0 "primary", 1 "degraded", 2 "recalibrating",
// 3 "ramping", and -1 for any other name.
func BreakerState(name string) int64 {
	switch name {
	case "primary":
		return 0
	case "degraded":
		return 1
	case "recalibrating":
		return 2
	case "ramping":
		return 3
	}
	return -1
}

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

// breaker records a breaker's new state and share, and counts the change.
// It runs under the breaker's lock: it only records.
func (a *Adapter) breaker(b observe.Breaker) {
	ctx := context.Background()
	opt := a.with(KeyBreaker.String(b.Name))
	a.breakerState.Record(ctx, BreakerState(b.To), opt)
	a.breakerShare.Record(ctx, b.Share, opt)
	a.breakerChanges.Add(ctx, 1, a.with(KeyBreaker.String(b.Name), KeyBreakerFrom.String(b.From), KeyBreakerTo.String(b.To)))
}

// correction counts a reconcile finding and the size of its change.
func (a *Adapter) correction(c observe.Correction) {
	ctx := context.Background()
	opt := a.with(KeyAction.String(c.Action))
	a.corrections.Add(ctx, 1, opt)
	d := c.Delta
	if d < 0 {
		d = -d
	}
	a.correctedUnits.Add(ctx, d, opt)
}

// limit counts a limiter decision and records its duration.
func (a *Adapter) limit(ctx context.Context, l observe.Limit) {
	outcome := observe.Classify(l.Err).String()
	allowed := "false"
	if l.Allowed {
		allowed = "true"
	}
	a.decisions.Add(ctx, 1, a.opt(setKey{kindLimitDecision, l.Limiter, allowed, outcome}))
	a.limitDuration.Record(ctx, l.Duration.Seconds(), a.opt(setKey{kind: kindLimit, a: l.Limiter}))
}
