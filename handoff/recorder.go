package handoff

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// ErrBacklog is Recorder.Admit's refusal while the hand-off lags past its
// bound: nothing was held, retry later. It matches stock.ErrContention.
var ErrBacklog error = backlogError{}

type backlogError struct{}

func (backlogError) Error() string { return "handoff: the hand-off lags, retry later" }

// Is makes ErrBacklog match stock.ErrContention.
func (backlogError) Is(target error) bool { return target == stock.ErrContention }

// LevelsReader reads a SKU's levels and settings: the gate a tiered flow
// admits orders at (tiered.Manager's Levels answers the gate's, and so do
// a redisstock.Store's).
type LevelsReader interface {
	Levels(ctx context.Context, sku string) (stock.Levels, error)
}

// RecorderConfig configures a Recorder. The zero value is ready to use
// and applies no backpressure.
type RecorderConfig struct {
	// Lag reports the hand-off's current lag: how far behind its consumers
	// are (Consumer.Lag, or LagOf over several). Nil: Admit admits every
	// order.
	Lag func() time.Duration
	// MaxLag is the lag past which Admit refuses new orders. Zero means
	// half the order's hold time at the gate: a hold still has half its
	// time when its order reaches the record, for the buyer to pay.
	// Negative means no bound.
	MaxLag time.Duration
	// HoldCache is how long a SKU's hold time, read from the gate, is
	// reused before it is read again. Zero means a second.
	HoldCache time.Duration
	// Clock tells the time of Message.Sent and Deadline. Nil means
	// stock.SystemClock.
	Clock stock.Clock
}

// Recorder is the tiered flow's Recorder over a Publisher: give it as
// tiered.Config.Recorder (stockguard.Config.Handoff builds one). It is a
// tiered.Admitter too: with a Lag configured, new orders are refused with
// ErrBacklog while the hand-off lags past the bound. It is safe for
// concurrent use.
type Recorder struct {
	pub  Publisher
	gate LevelsReader
	cfg  RecorderConfig

	mu    sync.Mutex
	holds map[string]cachedHold
}

type cachedHold struct {
	hold time.Duration
	at   time.Time
}

// NewRecorder returns a Recorder that publishes to pub. The hold time of
// each message's Deadline is the gate's: the order's own HoldTTL, or else
// the shortest hold time gate reports for the order's SKUs (read once per
// RecorderConfig.HoldCache), so it cannot disagree with the listing.
func NewRecorder(pub Publisher, gate LevelsReader, cfg RecorderConfig) *Recorder {
	if cfg.HoldCache <= 0 {
		cfg.HoldCache = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	return &Recorder{pub: pub, gate: gate, cfg: cfg, holds: map[string]cachedHold{}}
}

// Record publishes o with its deadline: now (just after the gate took the
// hold, so a little after the gate's own clock started it) plus the
// order's hold time. A gate that cannot tell the hold time leaves the
// Deadline zero (unknown: never counted expired) rather than fail the
// hand-off.
func (r *Recorder) Record(ctx context.Context, o stock.Order) error {
	now := r.cfg.Clock.Now()
	m := Message{Order: o, Sent: now}
	if hold, err := r.hold(ctx, o); err == nil {
		m.Deadline = now.Add(hold)
	}
	return r.pub.Publish(ctx, m)
}

// Admit refuses o with ErrBacklog while the lag exceeds the bound
// (RecorderConfig.MaxLag, by default half o's hold time); nil otherwise,
// and always without a Lag. A hold time the gate cannot tell admits o:
// the Deduct that follows asks the gate anyway.
func (r *Recorder) Admit(ctx context.Context, o stock.Order) error {
	if r.cfg.Lag == nil || r.cfg.MaxLag < 0 {
		return nil
	}
	lag := r.cfg.Lag()
	if lag <= 0 {
		return nil
	}
	bound := r.cfg.MaxLag
	if bound == 0 {
		hold, err := r.hold(ctx, o)
		if err != nil {
			return nil
		}
		bound = hold / 2
	}
	if lag > bound {
		return ErrBacklog
	}
	return nil
}

// hold returns o's hold time at the gate.
func (r *Recorder) hold(ctx context.Context, o stock.Order) (time.Duration, error) {
	if o.HoldTTL > 0 {
		return o.HoldTTL, nil
	}
	if len(o.Items) == 0 {
		return 0, errNoItems
	}
	var hold time.Duration
	for i, it := range o.Items {
		h, err := r.skuHold(ctx, it.SKU)
		if err != nil {
			return 0, err
		}
		if i == 0 || h < hold {
			hold = h
		}
	}
	return hold, nil
}

var errNoItems = errors.New("handoff: order without items")

func (r *Recorder) skuHold(ctx context.Context, sku string) (time.Duration, error) {
	now := time.Now()
	r.mu.Lock()
	c, ok := r.holds[sku]
	r.mu.Unlock()
	if ok && now.Sub(c.at) < r.cfg.HoldCache {
		return c.hold, nil
	}
	l, err := r.gate.Levels(ctx, sku)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.holds[sku] = cachedHold{hold: l.HoldTTL, at: now}
	r.mu.Unlock()
	return l.HoldTTL, nil
}
