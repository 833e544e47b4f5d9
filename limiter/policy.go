package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/typednil"
)

// ErrorMode says what a Redis-backed limiter decides when Redis fails and
// no Fallback is set.
type ErrorMode int

const (
	// ReturnError returns the failure (a *RedisError, matching
	// ErrUnavailable) and no decision: the caller chooses. The default.
	ReturnError ErrorMode = iota
	// FailOpen admits the request (Decision.Degraded set): availability
	// over protection.
	FailOpen
	// FailClosed refuses the request (Decision.Degraded set, RetryAfter the
	// backoff): protection over availability.
	FailClosed
)

// Policy is what a Redis-backed limiter does beyond counting. The zero value
// means: no allowlist, return Redis errors, no fallback, 100 ms backoff,
// a Redis failure after 3 calls in a row ended by their deadline.
//
// A call's deadline that ends it before Redis answers is ambiguous: an
// impatient caller on a healthy Redis, or a Redis that does not answer.
// One such call is no Redis failure, so that a caller with a short
// deadline does not put every other caller into the Backoff;
// DeadlineFailures of them in a row, with no Redis reply in between,
// are one. A network error (a read timeout shorter than the caller's
// deadline, a refused connection) is a Redis failure at once. For the
// clearest signal, give the limiter a client that fails fast and does
// not retry (redisstock.FailFast, or go-redis's Options.MaxRetries -1 and
// a ReadTimeout shorter than callers' deadlines): go-redis's retries
// (MaxRetries 3 by default) wait on the caller's context, so a call that
// met a read timeout may still end with the context's error.
type Policy struct {
	// Bypass reports whether a key is on the allowlist. An allowlisted call
	// is admitted at once (Decision.Bypassed) and counts nothing. A
	// Composite asks about each "<dimension>:<value>"; one allowlisted value
	// bypasses the whole call. nil: no allowlist.
	Bypass func(key string) bool
	// OnError decides calls made while Redis is failing, when Fallback is
	// nil. Context cancellation is never masked: a call on an ended context
	// (within the Backoff too) is not decided; it returns an error matching
	// ctx.Err() and counts nothing. A call whose context ends while Redis
	// does not answer returns that error too (joined with the *RedisError
	// it met). A network error it met still starts the Backoff and reaches
	// OnRedisError, so the calls that follow are decided at once; the
	// context's own deadline does so once DeadlineFailures calls in a row
	// have ended by it (see DeadlineFailures).
	OnError ErrorMode
	// Fallback, if set, decides calls while Redis is failing: typically a
	// *Local with a tighter limit, the safety net that still turns away
	// floods (go-zero's rescue limiter). A Redis limiter asks it about the
	// key. A Composite asks it about each of the call's dimensions in turn,
	// as "<dimension>:<value>" without a Tag and
	// ":<len(tag)>:<tag>:<dimension>:<value>" with one (so, as in Redis,
	// calls share a counter only when they share the tag), or, for a key
	// longer than MaxKeyLen, "#" and the key's hex SHA-256; it stops at the first refusal (events already taken from
	// earlier dimensions stay taken). An n above what a *Local or *Redis
	// Fallback could ever admit at once (its Burst, or a window's Rate: a
	// tighter limit than the caller's) is refused (Degraded, RetryAfter the
	// Backoff, at least 1 ms) before any dimension counts, not reported as
	// invalid. If it is also a Resetter, Reset clears those keys in it too.
	Fallback Limiter
	// Backoff is how long, after a Redis failure, calls skip Redis and go
	// straight to the Fallback or OnError mode, so a down Redis does not cost
	// every request a timeout. A network error met by a call whose own
	// deadline ran out meanwhile starts it too. An error that is the
	// call's context ending starts it only when it is the deadline's and
	// the DeadlineFailures-th such ending in a row (cancellation never
	// does). The first call after it tries Redis again. Default 100 ms;
	// negative means always try Redis.
	Backoff time.Duration
	// OnRedisError, if set, is told of every Redis failure (for logging and
	// metrics); a CROSSSLOT reply is the caller's error, not one, and
	// neither is an error that is the call's own context ending, except
	// the DeadlineFailures-th deadline in a row and each one after it
	// until Redis answers (a *RedisError saying how many). It must be safe
	// for concurrent use.
	OnRedisError func(error)
	// DeadlineFailures is how many calls in a row ended by their context's
	// deadline before Redis answered them, with no Redis reply to any
	// call in between, make a Redis failure: the last of them starts the
	// Backoff and is told to OnRedisError, and so is each such ending
	// after it until Redis answers a call. It counts also a call that met
	// a read timeout and then ended by its deadline while the client
	// waited to send it again. A call ended by cancellation
	// (context.Canceled) never counts, nor does a call whose context had
	// ended before it was made (Redis is not asked). The call that ends by
	// its deadline is never decided by the policy, whatever the count: it
	// returns an error matching ctx.Err(). Default 3; 1 makes every such
	// ending a Redis failure; negative means a deadline never is one.
	DeadlineFailures int
	// Clock times the Backoff only (counting uses Redis server time).
	// Default the wall clock.
	Clock Clock
}

// guard applies a Policy around Redis calls.
type guard struct {
	p         Policy
	downUntil atomic.Int64 // unix ns; Redis is skipped before it
	deadlines atomic.Int64 // calls in a row ended by their deadline, no Redis reply since
}

func newGuard(p Policy, field string) (*guard, error) {
	if p.OnError < ReturnError || p.OnError > FailClosed {
		return nil, invalid(field+".OnError", "unknown ErrorMode")
	}
	if p.Fallback != nil && typednil.Is(p.Fallback) {
		return nil, invalid(field+".Fallback", fmt.Sprintf("a nil %T", p.Fallback))
	}
	if p.Clock != nil && typednil.Is(p.Clock) {
		return nil, invalid(field+".Clock", fmt.Sprintf("a nil %T", p.Clock))
	}
	if p.Backoff == 0 {
		p.Backoff = 100 * time.Millisecond
	}
	if p.DeadlineFailures == 0 {
		p.DeadlineFailures = 3
	}
	if p.Clock == nil {
		p.Clock = systemClock{}
	}
	return &guard{p: p}, nil
}

// bypassed reports whether any of keys is allowlisted.
func (g *guard) bypassed(keys ...string) bool {
	if g.p.Bypass == nil {
		return false
	}
	for _, k := range keys {
		if k != "" && g.p.Bypass(k) {
			return true
		}
	}
	return false
}

// skip reports whether Redis is in its backoff after a failure.
func (g *guard) skip() bool {
	return g.p.Backoff > 0 && g.p.Clock.Now().UnixNano() < g.downUntil.Load()
}

// answered records that Redis replied to a call: the run of calls ended
// by their deadline is over.
func (g *guard) answered() {
	if g.deadlines.Load() != 0 {
		g.deadlines.Store(0)
	}
}

// down starts the Backoff and reports err.
func (g *guard) down(err error) {
	if g.p.Backoff > 0 {
		g.downUntil.Store(g.p.Clock.Now().Add(g.p.Backoff).UnixNano())
	}
	if g.p.OnRedisError != nil {
		g.p.OnRedisError(err)
	}
}

// failed records a Redis failure and returns the error to report, and
// whether the policy may decide instead. The server's CROSSSLOT reply is
// the caller's ErrCrossSlot (no outage: no backoff, no report), joined
// with ctx.Err() when the context has ended. An error that is the call's
// own context ending (it matches ctx.Err()) is no Redis failure, unless it
// is the deadline's and the DeadlineFailures-th such ending in a row. Any
// other error starts the Backoff and is told to OnRedisError, also when
// the context has ended meanwhile (a client read timeout: the server did
// not answer). A call whose context ended is never decided by the
// policy: its error is the *RedisError joined with ctx.Err().
func (g *guard) failed(ctx context.Context, err error) (error, bool) {
	rerr := &RedisError{Err: err}
	ctxErr := ctx.Err()
	switch {
	case crossSlot(err):
		g.answered()
		cerr := fmt.Errorf("%w: %w", ErrCrossSlot, err)
		if ctxErr != nil {
			return errors.Join(cerr, ctxErr), false
		}
		return cerr, false
	case ctxErr != nil && errors.Is(err, ctxErr):
		// The call's own context ended it. Cancellation is the caller's
		// choice; a deadline may be an impatient caller or a Redis that
		// does not answer: only a run of them is an outage.
		if errors.Is(ctxErr, context.DeadlineExceeded) && g.p.DeadlineFailures > 0 {
			if n := g.deadlines.Add(1); n >= int64(g.p.DeadlineFailures) {
				g.down(&RedisError{Err: fmt.Errorf("%d calls in a row ended by their deadline before Redis answered: %w", n, err)})
			}
		}
	default:
		g.down(rerr)
	}
	if ctxErr != nil {
		return errors.Join(rerr, ctxErr), false
	}
	return rerr, true
}

// capped is a limiter that knows the most events one call may ask of it
// (a larger n could never be admitted).
type capped interface {
	maxN() int64
}

// crossSlot reports whether err is the server's CROSSSLOT reply.
func crossSlot(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "CROSSSLOT")
}

// degraded decides a call without Redis. keys and names are the fallback
// keys and the dimension names they stand for.
func (g *guard) degraded(ctx context.Context, cause error, keys, names []string, n int) (Decision, error) {
	if g.p.Fallback != nil {
		if c, ok := g.p.Fallback.(capped); ok && int64(n) > c.maxN() {
			// The Fallback could never admit n: a refusal, checked before
			// any dimension counts.
			wait := max(g.p.Backoff, time.Millisecond)
			for i, k := range keys {
				if k != "" {
					return Decision{RetryAfter: wait, ResetAfter: wait, DeniedBy: names[i], Degraded: true}, nil
				}
			}
		}
		d := Decision{Allowed: true, Remaining: math.MaxInt64, Degraded: true}
		for i, k := range keys {
			if k == "" {
				continue
			}
			fd, err := g.p.Fallback.AllowN(ctx, k, n)
			if err != nil {
				return Decision{}, errors.Join(cause, err)
			}
			d.ResetAfter = max(d.ResetAfter, fd.ResetAfter)
			if !fd.Allowed {
				return Decision{RetryAfter: fd.RetryAfter, ResetAfter: max(d.ResetAfter, fd.RetryAfter), DeniedBy: names[i], Degraded: true}, nil
			}
			d.Remaining = min(d.Remaining, fd.Remaining)
		}
		return d, nil
	}
	switch g.p.OnError {
	case FailOpen:
		return Decision{Allowed: true, Degraded: true}, nil
	case FailClosed:
		wait := max(g.p.Backoff, time.Millisecond)
		return Decision{RetryAfter: wait, ResetAfter: wait, Degraded: true}, nil
	}
	return Decision{}, cause
}
