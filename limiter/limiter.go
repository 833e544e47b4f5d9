package limiter

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Limiter decides whether events keyed by a string may happen now.
// Implementations in this package are safe for concurrent use.
type Limiter interface {
	// Allow is AllowN(ctx, key, 1).
	Allow(ctx context.Context, key string) (Decision, error)
	// AllowN reports whether n events (n >= 1) may happen now for key, and
	// if so counts them. A refused call counts nothing (but a call whose
	// reply was lost and which its client re-sent was counted by its first
	// run; see Lost replies in the package doc). An error means no decision
	// was returned: invalid input, or the store failed and the policy says
	// to return the error; a store failure after the call was sent may have
	// counted it.
	AllowN(ctx context.Context, key string, n int) (Decision, error)
}

// Resetter clears a key's state, so that the key admits as a fresh key
// would. *Local and *Redis implement it (a *Composite resets a Request). An
// error means the state may not have been cleared; a Reset racing an Allow
// on the same key is ordered either before or after it.
type Resetter interface {
	Reset(ctx context.Context, key string) error
}

// Decision is the answer to one Allow or AllowN call.
type Decision struct {
	// Allowed reports whether the events were admitted and counted.
	Allowed bool
	// Remaining is how many more events the key (for a Composite, the most
	// constrained of its dimensions) could admit right now. 0 when refused.
	Remaining int64
	// RetryAfter, when refused, is how long until the same call could be
	// admitted if nothing else is counted meanwhile; 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the key (for a Composite, every
	// dimension of the call: the longest of them) is back to its full
	// capacity if nothing more is counted: its bucket full (GCRA, Local),
	// its window closed (FixedWindow), its newest event out of the window
	// (SlidingWindow). 0 when already full. Set whether allowed or refused,
	// and never less than RetryAfter (as go-redis/redis_rate's ResetAfter).
	// 0 when Bypassed. When Degraded: the Fallback's (the longest of the
	// dimensions it was asked about), RetryAfter under FailClosed and when
	// n is above the Fallback's Burst, 0 under FailOpen.
	ResetAfter time.Duration
	// DeniedBy names the Composite dimension that refused first ("" when
	// allowed, and for single-key limiters).
	DeniedBy string
	// Bypassed reports that the key is on the policy's allowlist: nothing
	// was counted.
	Bypassed bool
	// Degraded reports that Redis was not consulted or failed, and the
	// decision came from the policy's Fallback or its OnError mode.
	Degraded bool
}

// Limit is a rate: Rate events per Period. The zero Period means one second;
// a Period is a whole number of microseconds, the unit Redis counts time
// in (any other is refused with ErrInvalid).
//
// For GCRA and Local, Rate is the sustained rate and Burst is how many
// events may happen at once (zero means Burst = Rate); refilling a whole
// burst (Burst/Rate periods) may take at most MaxPeriod. For FixedWindow and
// SlidingWindow, Rate is the most events in one window of Period, and Burst
// is ignored (never checked nor used, whatever its value).
type Limit struct {
	Rate   int64
	Period time.Duration
	Burst  int64
}

// Bounds on a Limit, keys and n, checked before any work. They keep every
// count exact in Lua's doubles and every Redis key layout intact.
const (
	// MaxKeyLen is the longest key (and Composite value or tag), in bytes.
	MaxKeyLen = 256
	// MaxRate is the largest Rate, Burst and n.
	MaxRate = 1_000_000_000
	// MaxSlidingRate is the largest Rate of a SlidingWindow limit: its log
	// holds one sorted-set member (~64 bytes in Redis) per counted event.
	MaxSlidingRate = 10_000
	// MinPeriod and MaxPeriod bound Limit.Period.
	MinPeriod = time.Millisecond
	MaxPeriod = 366 * 24 * time.Hour
)

// PerSecond returns a Limit of rate events per second with burst rate.
func PerSecond(rate int64) Limit { return Limit{Rate: rate, Period: time.Second} }

// PerMinute returns a Limit of rate events per minute with burst rate.
func PerMinute(rate int64) Limit { return Limit{Rate: rate, Period: time.Minute} }

// resolved returns l with defaults filled in.
func (l Limit) resolved() Limit {
	if l.Period == 0 {
		l.Period = time.Second
	}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	return l
}

// validate checks a resolved limit; field names it in the error. Burst is
// checked for GCRA (and Local, which validates as GCRA) only: the window
// algorithms ignore it, whatever its value.
func (l Limit) validate(field string, alg Algorithm) error {
	if l.Rate < 1 || l.Rate > MaxRate {
		return invalid(field+".Rate", fmt.Sprintf("%d is outside [1, %d]", l.Rate, MaxRate))
	}
	if alg == SlidingWindow && l.Rate > MaxSlidingRate {
		return invalid(field+".Rate", fmt.Sprintf("%d is above MaxSlidingRate %d", l.Rate, MaxSlidingRate))
	}
	if l.Period < MinPeriod || l.Period > MaxPeriod {
		return invalid(field+".Period", fmt.Sprintf("%v is outside [%v, %v]", l.Period, MinPeriod, MaxPeriod))
	}
	if l.Period%time.Microsecond != 0 {
		return invalid(field+".Period", fmt.Sprintf("%v is not a whole number of microseconds", l.Period))
	}
	if alg != GCRA {
		return nil // Burst is ignored by the window algorithms
	}
	if l.Burst < 1 || l.Burst > MaxRate {
		return invalid(field+".Burst", fmt.Sprintf("%d is outside [1, %d]", l.Burst, MaxRate))
	}
	if float64(l.Burst)/float64(l.Rate)*float64(l.Period) > float64(MaxPeriod) {
		return invalid(field, "refilling Burst takes longer than MaxPeriod")
	}
	return nil
}

// capacity is the most events one call may ask for under l.
func (l Limit) capacity(alg Algorithm) int64 {
	if alg == FixedWindow || alg == SlidingWindow {
		return l.Rate
	}
	return l.Burst
}

// validateN checks 1 <= n <= max, where max is what the limit could ever
// admit at once (a larger n could never be allowed).
func validateN(n int, max int64) error {
	if n < 1 || int64(n) > max {
		return invalid("n", strconv.Itoa(n)+" is outside [1, "+strconv.FormatInt(max, 10)+"]")
	}
	return nil
}

// Algorithm selects how a Redis-backed limiter counts.
type Algorithm int

const (
	// GCRA is a token bucket (generic cell rate algorithm, as
	// go-redis/redis_rate): Rate per Period sustained, Burst at once. One
	// small string per key. Its arithmetic is exact: every event is charged
	// Period/Rate, with no rounding on any call, so Burst events pass at
	// one instant and Remaining is exactly how many more single events
	// would pass now. The default.
	GCRA Algorithm = iota
	// FixedWindow counts events in a window that opens at a key's first
	// admitted event and lasts Period (the INCR + EXPIRE counter). Up to
	// 2*Rate events can pass around a window edge.
	FixedWindow
	// SlidingWindow logs events and admits at most Rate in any Period-long
	// window: no burst at a window edge. Memory grows with Rate (see
	// MaxSlidingRate).
	SlidingWindow
)

// String returns "gcra", "fixed" or "sliding"; it is also the part of the
// Redis key that keeps algorithms apart.
func (a Algorithm) String() string {
	switch a {
	case GCRA:
		return "gcra"
	case FixedWindow:
		return "fixed"
	case SlidingWindow:
		return "sliding"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// Clock tells a limiter the time. stock.Clock satisfies it.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock. It reads only the monotonic clock after
// its start (one clock read instead of two), which halves the cost of Now on
// the Local hot path.
type systemClock struct{}

var clockBase = time.Now()

func (systemClock) Now() time.Time { return clockBase.Add(time.Since(clockBase)) }
