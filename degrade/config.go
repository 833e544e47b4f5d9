package degrade

import (
	"context"
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var (
	// ErrBusy: the call was routed to the fallback and the fallback's rate
	// limit refused it. Nothing was written; retry later. It matches
	// stock.ErrContention, the contract's "nothing applied, retry later".
	ErrBusy error = busyError{}
	// ErrPrimaryDown: the call needed the primary (the order may be held
	// there) and the primary is not taking traffic. It comes joined with
	// stock.ErrUnknownOutcome: retry with the same order ID later.
	ErrPrimaryDown = errors.New("degrade: primary unavailable")
)

// Config configures a Manager. The zero value means the documented defaults.
type Config struct {
	// PerSKU, above zero, gives each SKU a breaker of its own, and is how
	// many closed ones no call is using are kept: least recently used ones
	// beyond it are forgotten, with the failures they counted, and one
	// forgotten starts closed, counting none, when next needed. A breaker
	// that carries outage state is never forgotten: while it is open,
	// recalibrating or ramping, has tripped, has let a write at the
	// fallback alone through (in ForceFallback mode too) that no
	// recalibration has read yet, or is in use by a call. So the breakers
	// kept are at most PerSKU, plus those of the SKUs touched during an
	// outage (or a ForceFallback spell) until they are closed again, plus
	// those of the calls running. Zero means one breaker for the whole
	// shop. An order goes to the primary only if the breakers of all its
	// SKUs let it, and to the fallback only if all of them are open; an
	// order some of whose breakers are open counts as a failure for the
	// others that are closed, which then follow to the fallback within
	// ReadyToTrip. Of an order of more SKUs than PerSKU, only PerSKU closed
	// breakers keep their counts between its calls: the others count
	// failures once those have opened, so the order reaches the fallback
	// after about ReadyToTrip's threshold once per PerSKU of its SKUs.
	// Confirm and Revert, which name no SKU, share one more breaker of
	// their own.
	PerSKU int

	// ReadyToTrip decides, after each counted failure while a breaker is
	// closed, whether it opens; default: 5 consecutive failures. Only
	// infrastructure failures are counted (and, with PerSKU, an order held
	// off the primary by another of its SKUs' breakers): business outcomes
	// (sold out, limit, unknown order...) are successes and the caller's
	// own cancellation is ignored. While ramping back, one failure trips.
	ReadyToTrip func(gobreaker.Counts) bool
	// Interval clears a closed breaker's counts periodically (gobreaker's
	// Interval, on the wall clock); zero never clears them, which suits the
	// default consecutive-failure rule.
	Interval time.Duration

	// OpenFor is how long a breaker stays open before recalibration is
	// tried; default 10s, read on Clock.
	OpenFor time.Duration
	// Recalibrate, if set, runs (in the background, once per breaker
	// reopening) before any traffic returns to the primary, e.g. a
	// reconcile pass that repairs Redis from the database. key is the SKU
	// of a per-SKU breaker, or "" for the shared one. An error keeps the
	// breaker open for another OpenFor.
	Recalibrate func(ctx context.Context, key string) error
	// RecalibrateTimeout bounds one Recalibrate call; default 1 minute.
	RecalibrateTimeout time.Duration

	// RampSteps are the shares of traffic sent to the primary after
	// recalibration, each in (0, 1), before all of it returns. Nil means
	// {0.1, 0.5}; a non-nil empty slice returns all traffic at once.
	RampSteps []float64
	// RampInterval is how long each ramp step lasts (on Clock), and it
	// moves on only once the primary has answered at least one call in
	// the step without failing; default 10s.
	RampInterval time.Duration

	// FallbackLimit and FallbackBurst are the fallback's token bucket
	// (golang.org/x/time/rate, on Clock) shared by every Deduct, Available
	// and Levels routed to the fallback; defaults 100/s and 10. Confirm,
	// Revert, PutOnSale and Restock are not limited: they finish what was
	// started or are an operator's. A refused call gets ErrBusy. A
	// FallbackLimit of zero or below means the default, rate.Inf admits
	// every call, and NaN is refused by New.
	FallbackLimit rate.Limit
	FallbackBurst int

	// Orders is how many order IDs this node remembers with the tier that
	// took them (or whose primary outcome is unknown); default 65536.
	Orders int

	// OnStateChange, if set, receives every state change. It runs on its
	// own goroutine, fed by a buffer of EventBuffer events (default 256);
	// when the buffer is full, events are dropped (see Manager.Dropped)
	// rather than ever blocking a breaker or a call.
	OnStateChange func(Event)
	EventBuffer   int

	// Clock reads time for OpenFor, the ramp and the fallback limiter;
	// default stock.SystemClock.
	Clock stock.Clock

	// Observer receives the Manager's calls and its breakers' state
	// changes (package observe), synchronously; the zero value reports
	// nothing. Each breaker is reported as it is made, with From "" and
	// its first state: the shared one by New, a per-SKU one when its SKU
	// is first seen.
	Observer observe.Observer
}

func (c Config) withDefaults() Config {
	if c.ReadyToTrip == nil {
		c.ReadyToTrip = func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= 5 }
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 10 * time.Second
	}
	if c.RecalibrateTimeout <= 0 {
		c.RecalibrateTimeout = time.Minute
	}
	if c.RampSteps == nil {
		c.RampSteps = []float64{0.1, 0.5}
	}
	if c.RampInterval <= 0 {
		c.RampInterval = 10 * time.Second
	}
	if c.FallbackLimit <= 0 {
		c.FallbackLimit = 100
	}
	if c.FallbackBurst <= 0 {
		c.FallbackBurst = 10
	}
	if c.Orders <= 0 {
		c.Orders = 1 << 16
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = 256
	}
	if c.Clock == nil {
		c.Clock = stock.SystemClock
	}
	return c
}

// State is where one breaker sends traffic.
type State int

const (
	// Primary: all traffic goes to the primary; failures are counted.
	Primary State = iota
	// Degraded: the breaker is open; traffic goes to the fallback.
	Degraded
	// Recalibrating: Config.Recalibrate is running; traffic still goes to
	// the fallback.
	Recalibrating
	// Ramping: a share of traffic (Event.Share) goes to the primary; one
	// failure goes back to Degraded.
	Ramping
)

func (s State) String() string {
	switch s {
	case Primary:
		return "primary"
	case Degraded:
		return "degraded"
	case Recalibrating:
		return "recalibrating"
	case Ramping:
		return "ramping"
	}
	return "unknown"
}

// Event is one state change of one breaker.
type Event struct {
	// Key is the breaker's SKU, or "" for the shared breaker.
	Key      string
	From, To State
	// Share is the primary's share of traffic in To (1 for Primary, 0 for
	// Degraded and Recalibrating).
	Share float64
	// Err is the failed recalibration that sent the breaker back to
	// Degraded, if that is what happened.
	Err error
	At  time.Time
}

// Mode is the operator's switch.
type Mode int

const (
	// Auto lets the breakers decide.
	Auto Mode = iota
	// ForceFallback sends all traffic to the fallback (rate limited). Going
	// back to Auto recalibrates and ramps every breaker as after an outage.
	ForceFallback
	// ForcePrimary sends all traffic to the primary and counts nothing.
	ForcePrimary
)

func (m Mode) String() string {
	switch m {
	case ForceFallback:
		return "force-fallback"
	case ForcePrimary:
		return "force-primary"
	}
	return "auto"
}

// busyError is ErrBusy.
type busyError struct{}

func (busyError) Error() string { return "degrade: busy, retry later" }

// Is makes ErrBusy match stock.ErrContention.
func (busyError) Is(target error) bool { return target == stock.ErrContention }
