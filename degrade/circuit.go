package degrade

import (
	"container/list"
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// errSkip reports a call that was admitted by a breaker but not made (or
// ended by the caller's cancellation): gobreaker excludes it from counts.
var errSkip = errors.New("degrade: not counted")

// errOthersOff is counted as a failure by the breakers that would send an
// order to the primary while another breaker of the order keeps it off
// (see route).
var errOthersOff = errors.New("degrade: another SKU of the order is off the primary")

// circuit is one breaker: a gobreaker that counts failures and decides to
// trip while traffic goes to the primary, and the states around it that
// gobreaker cannot run on an injected clock (open period, recalibration,
// ramp). gobreaker's own half-open state is never reached: once it trips,
// its instance is dropped and a fresh one starts the ramp.
//
// Lock order: the Manager's breaker set (breakers.mu) before c.mu; c.recal
// before c.fb, c.fb before c.mu; c.mu may be held while calling into the
// gobreaker, never the reverse. The gobreaker's OnStateChange (which runs
// under its lock) only sets an atomic flag.
type circuit struct {
	d   *Manager
	key string

	tripped atomic.Bool // set by the current gobreaker when it opens
	ramping atomic.Bool // read by ReadyToTrip

	// fb is held shared by each write at the fallback alone while it
	// runs, and taken exclusively by a recalibration before it reads, so
	// that the recalibration reads after every such write (see
	// Manager.enterFallback).
	fb sync.RWMutex
	// recal is held by a recalibration while it runs: one that starts
	// after an earlier one of the breaker was given up (the operator
	// left ForceFallback meanwhile) waits for it to end, so that traffic
	// never returns while a recalibration of the key still writes.
	recal sync.Mutex

	// users and elem are the breaker set's (breakers.mu): the calls
	// using the breaker, and its place in the set's list (nil when out).
	users int
	elem  *list.Element

	mu     sync.Mutex
	cb     *gobreaker.TwoStepCircuitBreaker[struct{}]
	gen    uint64
	state  State
	since  time.Time
	step   int
	stepOK int
	n      uint64 // calls seen in this ramp step
	epoch  uint64 // Manager.epoch when last looked at
	// unread: a write at the fallback alone was admitted under the
	// breaker (ForceFallback mode included) that no recalibration has
	// read yet.
	unread bool
}

func newCircuit(d *Manager, key string) *circuit {
	c := &circuit{d: d, key: key, epoch: d.epoch.Load()}
	c.fresh()
	return c
}

// fresh replaces the gobreaker with a closed one. Callers hold c.mu (or
// own c exclusively).
func (c *circuit) fresh() {
	c.gen++
	c.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:     c.key,
		Interval: c.d.cfg.Interval,
		Timeout:  24 * time.Hour, // never reached: the instance is dropped when it opens
		ReadyToTrip: func(n gobreaker.Counts) bool {
			if c.ramping.Load() {
				return n.ConsecutiveFailures >= 1
			}
			return c.d.cfg.ReadyToTrip(n)
		},
		IsSuccessful: func(err error) bool { return err == nil || stock.IsBusiness(err) },
		IsExcluded:   func(err error) bool { return errors.Is(err, errSkip) },
		// Runs under the gobreaker's lock: it must not block or call back.
		// A dropped instance never changes state again (nobody asks it),
		// so the flag always comes from the current one.
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				c.tripped.Store(true)
			}
		},
	})
}

// to moves to state s at now and reports it. Callers hold c.mu.
func (c *circuit) to(s State, now time.Time, err error) {
	from := c.state
	c.state, c.since = s, now
	share := 0.0
	switch s {
	case Primary:
		share = 1
		c.ramping.Store(false)
	case Ramping:
		share = c.d.cfg.RampSteps[c.step]
	}
	if from != s || s == Ramping {
		c.d.emit(Event{Key: c.key, From: from, To: s, Share: share, Err: err, At: now})
		if c.d.obs.Breaker != nil {
			c.d.obs.Breaker(observe.Breaker{Name: c.key, From: from.String(), To: s.String(), Share: share, Err: err})
		}
	}
}

// made reports the breaker's state as it is made (From ""), so that a
// breaker shows from its start, before any change. It takes c.mu: a
// change another caller makes meanwhile is reported after it, or is the
// state it reports.
func (c *circuit) made() {
	if c.d.obs.Breaker == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	share := 0.0
	if c.state == Primary {
		share = 1
	}
	c.d.obs.Breaker(observe.Breaker{Name: c.key, To: c.state.String(), Share: share})
}

// way is where a breaker sends a call.
type way int

const (
	toPrimary way = iota
	toFallback
	// settling: the breaker is recalibrating the primary, or ramping
	// traffic back and this call is not in the primary's share.
	settling
)

// admit says where a call goes. With share, a ramping breaker sends only
// its current share of calls to the primary; without (Confirm, Revert,
// operator writes), any breaker that is not open or recalibrating does.
// done, when non-nil, must be called with the primary's error (or
// errSkip).
func (c *circuit) admit(share bool) (w way, done func(error)) {
	now := c.d.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ep := c.d.epoch.Load(); ep != c.epoch {
		// Back from ForceFallback: recalibrate and ramp as after an outage.
		// A recalibration already running read before the fallback's
		// writes of the forced spell: a new generation ignores its end.
		c.epoch = ep
		c.fresh()
		c.tripped.Store(false)
		c.to(Degraded, now.Add(-c.d.cfg.OpenFor), nil)
	}
	c.observe(now)
	switch c.state {
	case Degraded:
		if now.Sub(c.since) < c.d.cfg.OpenFor {
			return toFallback, nil
		}
		// Started before the change is reported: a hook that panics must
		// not leave the breaker recalibrating with nothing running (the
		// recalibration waits for c.mu to report its end).
		c.d.bg.Add(1)
		go c.d.runRecalibrate(c, c.gen)
		c.to(Recalibrating, now, nil)
		return settling, nil
	case Recalibrating:
		return settling, nil
	case Ramping:
		if now.Sub(c.since) >= c.d.cfg.RampInterval && c.stepOK > 0 {
			c.step++
			c.stepOK, c.n = 0, 0
			if c.step == len(c.d.cfg.RampSteps) {
				c.to(Primary, now, nil)
			} else {
				c.to(Ramping, now, nil)
			}
		}
		if c.state == Ramping && share {
			c.n++
			p := c.d.cfg.RampSteps[c.step]
			if math.Floor(float64(c.n)*p) == math.Floor(float64(c.n-1)*p) {
				return settling, nil
			}
		}
	}
	cbDone, err := c.cb.Allow()
	if err != nil {
		return toFallback, nil
	}
	gen := c.gen
	return toPrimary, func(err error) {
		cbDone(err)
		ok := err == nil || stock.IsBusiness(err)
		if !ok && !c.tripped.Load() {
			return
		}
		now := c.d.cfg.Clock.Now()
		c.mu.Lock()
		defer c.mu.Unlock() // observe may report to a hook that panics
		c.observe(now)
		if ok && c.gen == gen && c.state == Ramping {
			c.stepOK++
		}
	}
}

// off reports whether the breaker keeps calls off the primary (open, or
// recalibrating it): admit then counts no share of its ramp.
func (c *circuit) off() bool {
	now := c.d.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(now)
	return c.state == Degraded || c.state == Recalibrating
}

// failOthersOff counts a call that another breaker of its order kept off
// the primary as a failure of the primary (errOthersOff), if this breaker
// sends every call there (Primary: not ramping, recalibrating or open), so
// that an order's breakers open together (see Manager.route). A ramping
// breaker is left alone: one failure would trip it, and another SKU's
// open breaker says nothing of the primary's health for this one.
func (c *circuit) failOthersOff() {
	c.mu.Lock()
	closed := c.state == Primary
	c.mu.Unlock()
	if !closed {
		return
	}
	if w, done := c.admit(false); w == toPrimary {
		done(errOthersOff)
	}
}

// observe moves to Degraded if the gobreaker tripped. Callers hold c.mu.
func (c *circuit) observe(now time.Time) {
	if c.tripped.Swap(false) && (c.state == Primary || c.state == Ramping) {
		c.to(Degraded, now, nil)
	}
}

// recalibrated ends a recalibration started at generation gen.
func (c *circuit) recalibrated(gen uint64, err error) {
	now := c.d.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.state != Recalibrating {
		return
	}
	if err != nil {
		c.to(Degraded, now, err)
		return
	}
	c.startRamp(now)
}

// startRamp sends the first share of traffic back to a fresh gobreaker.
// Callers hold c.mu.
func (c *circuit) startRamp(now time.Time) {
	c.fresh()
	c.tripped.Store(false)
	c.step, c.stepOK, c.n = 0, 0, 0
	if len(c.d.cfg.RampSteps) == 0 {
		c.to(Primary, now, nil)
		return
	}
	c.ramping.Store(true)
	c.to(Ramping, now, nil)
}

// open reports whether the breaker keeps traffic off the primary without
// recalibrating it: open, or the operator's ForceFallback.
func (c *circuit) open() bool {
	if c.d.Mode() == ForceFallback {
		return true
	}
	now := c.d.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(now)
	return c.state == Degraded
}

// current reports the circuit's state, for Manager.State.
func (c *circuit) current() State {
	now := c.d.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observe(now)
	return c.state
}

// clean reports whether the breaker carries no outage state, so that
// dropping it loses nothing but its failure counts (see breakers): closed
// (Primary) and not tripped, no write at the fallback alone unread by a
// recalibration. A recalibration or a ramp running, and the operator's
// switch back from ForceFallback already seen, leave it in another state.
// Its failure counts are left out: a closed breaker is kept for them only
// while it is among the most recently used (Config.PerSKU).
func (c *circuit) clean() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state == Primary && !c.unread && !c.tripped.Load()
}

// runRecalibrate is the background body of one recalibration. It waits
// for an earlier recalibration of the breaker that still runs, then for
// the writes at the fallback alone that were admitted before the breaker
// began to recalibrate (no new one is admitted since, but in
// ForceFallback mode), so the recalibration reads what they wrote. Close
// cancels it.
func (d *Manager) runRecalibrate(c *circuit, gen uint64) {
	defer d.bg.Done()
	c.recal.Lock()
	c.fb.Lock()
	c.mu.Lock()
	c.unread = false // read below
	c.mu.Unlock()
	c.fb.Unlock()
	var err error
	if d.cfg.Recalibrate != nil {
		ctx, cancel := context.WithTimeout(d.life, d.cfg.RecalibrateTimeout)
		err = d.cfg.Recalibrate(ctx, c.key)
		cancel()
	}
	c.recalibrated(gen, err)
	c.recal.Unlock()
	if d.set != nil {
		d.set.settled(c)
	}
}
