package handoff

import (
	"context"
	"errors"
	"fmt"
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

// RecorderConfig configures a Recorder. The zero value is ready to use:
// it applies backpressure by the broker's lag where the Publisher is an
// OldestReader, and none otherwise.
type RecorderConfig struct {
	// Lag reports the hand-off's current lag as this process sees it: how
	// far behind its consumers are (Consumer.Lag, or LagOf over several).
	// Over a Publisher that is an OldestReader the lag is the larger of
	// the two (an adapter may leave out of its Oldest the messages it
	// delays for a retry, while these consumers see them), or this one
	// alone while the broker's Oldest fails. Nil, and no OldestReader:
	// Admit admits every order.
	Lag func() time.Duration
	// LagCache is how long an answer of the broker's Oldest is reused
	// before Admit asks again, so that admissions do not cost a round trip
	// each; the lag still grows with the clock in between. Zero means
	// 100ms.
	LagCache time.Duration
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
	pub    Publisher
	gate   LevelsReader
	cfg    RecorderConfig
	oldest OldestReader // pub's, or nil

	mu    sync.Mutex
	holds map[string]cachedHold
	// The broker's last answer to Oldest, read at asked (the Clock's time);
	// refreshing is held by the one Admit asking again.
	answered   bool
	asked      time.Time
	sent       time.Time
	pending    bool // the queue held a message
	brokerErr  bool // the last Oldest failed
	refreshing sync.Mutex
}

type cachedHold struct {
	hold time.Duration
	at   time.Time
}

// NewRecorder returns a Recorder that publishes to pub. The hold time of
// each message's Deadline is the gate's: the order's own HoldTTL, or else
// the shortest hold time gate reports for the order's SKUs (read once per
// RecorderConfig.HoldCache, on its Clock), so it cannot disagree with the
// listing. Both pub and gate are needed: a Recorder made without either
// answers every Record and Admit with an error wrapping stock.ErrInvalid
// (and so does the zero Recorder).
func NewRecorder(pub Publisher, gate LevelsReader, cfg RecorderConfig) *Recorder {
	if cfg.HoldCache <= 0 {
		cfg.HoldCache = time.Second
	}
	if cfg.LagCache <= 0 {
		cfg.LagCache = 100 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	oldest, _ := pub.(OldestReader)
	return &Recorder{pub: pub, gate: gate, cfg: cfg, oldest: oldest, holds: map[string]cachedHold{}}
}

// Record publishes o with its deadline: now (just after the gate took the
// hold, so a little after the gate's own clock started it) plus the
// order's hold time. Every message it publishes has that Deadline, and
// the Consumer retries it until then (and past it while the gate still
// holds the order: see HoldReader). A hold time the gate cannot tell
// is read once more (a blip of the gate), and if that fails too Record
// publishes nothing and returns the gate's error: the tiered flow answers
// the order as half-way (an unknown outcome, the buyer is not told yes),
// and its retry with the same order hands it off. A Recorder made without
// a Publisher or a gate publishes nothing and returns an error wrapping
// stock.ErrInvalid.
func (r *Recorder) Record(ctx context.Context, o stock.Order) error {
	if err := r.wired(); err != nil {
		return err
	}
	now := r.cfg.Clock.Now()
	hold, err := r.hold(ctx, o)
	if err != nil && ctx.Err() == nil {
		hold, err = r.hold(ctx, o) // the SKUs read already are cached
	}
	if err != nil {
		return fmt.Errorf("handoff: read the order's hold time from the gate: %w", err)
	}
	return r.pub.Publish(ctx, Message{Order: o, Sent: now, Deadline: now.Add(hold)})
}

// RecordUntil publishes o with the Deadline deadline, the gate's own
// deadline of its hold, reading no hold time: tiered.Manager.Place hands
// off the retry of an order it answered half-way this way (see
// tiered.DeadlineRecorder), so that the message's Deadline is when the
// gate hold ends, though the hold began before the retry. Like Record it
// returns an error wrapping stock.ErrInvalid, publishing nothing, from a
// Recorder made without a Publisher or a gate.
func (r *Recorder) RecordUntil(ctx context.Context, o stock.Order, deadline time.Time) error {
	if err := r.wired(); err != nil {
		return err
	}
	return r.pub.Publish(ctx, Message{Order: o, Sent: r.cfg.Clock.Now(), Deadline: deadline})
}

// Admit refuses o with ErrBacklog while the lag exceeds the bound
// (RecorderConfig.MaxLag, by default half o's hold time); nil otherwise,
// and always without a lag to read; an error wrapping stock.ErrInvalid
// from a Recorder made without a Publisher or a gate. The lag is Lag's:
// the larger of the broker's (the age of the oldest message not
// acknowledged, from OldestReader) and RecorderConfig.Lag. A hold time
// the gate cannot tell admits o: the Deduct that follows asks the gate
// anyway.
func (r *Recorder) Admit(ctx context.Context, o stock.Order) error {
	if err := r.wired(); err != nil {
		return err
	}
	if r.cfg.MaxLag < 0 {
		return nil
	}
	lag := r.Lag(ctx)
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

// wired returns an error wrapping stock.ErrInvalid for a Recorder made
// without a Publisher or a gate, which could publish or admit nothing.
func (r *Recorder) wired() error {
	if r == nil || r.pub == nil || r.gate == nil {
		return &stock.InvalidError{Field: "handoff.NewRecorder", Reason: "needs a Publisher and a gate (LevelsReader)"}
	}
	return nil
}

// Lag is the hand-off's lag as Admit reads it: the larger of the age of
// the broker's oldest message not acknowledged (OldestReader, asked at
// most once per RecorderConfig.LagCache; left out where the Publisher
// does not tell it or its last answer was an error) and
// RecorderConfig.Lag; zero without either.
func (r *Recorder) Lag(ctx context.Context) time.Duration {
	var lag time.Duration
	if r.oldest != nil {
		lag, _ = r.brokerLag(ctx)
	}
	if r.cfg.Lag != nil {
		lag = max(lag, r.cfg.Lag())
	}
	return lag
}

// brokerLag is the age of the broker's oldest message, false while the
// broker's last answer was an error. One caller at a time asks the broker
// again once the answer is LagCache old; the others read the answer in
// hand meanwhile. A call cut short by the caller's own context is no
// answer: the next caller asks again.
func (r *Recorder) brokerLag(ctx context.Context) (time.Duration, bool) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	stale := !r.answered || now.Sub(r.asked) >= r.cfg.LagCache
	r.mu.Unlock()
	if stale && r.refreshing.TryLock() {
		sent, pending, err := r.oldest.Oldest(ctx)
		if ctx.Err() == nil {
			r.mu.Lock()
			r.answered, r.asked, r.sent, r.pending, r.brokerErr = true, now, sent, pending && err == nil, err != nil
			r.mu.Unlock()
		}
		r.refreshing.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.answered || r.brokerErr:
		return 0, false
	case !r.pending:
		return 0, true
	default:
		return max(now.Sub(r.sent), 0), true
	}
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
	now := r.cfg.Clock.Now()
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
