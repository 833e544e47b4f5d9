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
// A call that fails after its context has ended (ctx.Err() is set, or its
// deadline has passed) was ended by its caller, whatever error the client
// returned (a read timeout at the caller's deadline, a canceled wait): it
// gets no policy decision, and its error matches the context's ending
// (context.DeadlineExceeded or context.Canceled) and the *RedisError it
// met. An ending by deadline is ambiguous: an impatient caller on a
// healthy Redis, or a Redis that does not answer. One is no Redis failure,
// so that a caller with a short deadline does not put every other caller
// into the Backoff; DeadlineFailures of them in a row, with no Redis reply
// in between, are one. An ending by cancellation never is. A failure while
// the call's context is live (a network error, a read timeout shorter than
// the caller's deadline, a refused connection, an error reply other than
// CROSSSLOT) is a Redis failure at once. For the clearest signal, give the
// limiter a client that fails fast and does not retry (redisstock.FailFast,
// or go-redis's Options.MaxRetries -1 and a ReadTimeout shorter than
// callers' deadlines): go-redis's retries (MaxRetries 3 by default) wait on
// the caller's context, so a call that met a read timeout may still end
// with the context's error, and then counts only toward DeadlineFailures;
// so does every call Redis does not answer on a client whose read times
// out at the caller's deadline (go-redis's Options.ContextTimeoutEnabled).
type Policy struct {
	// Bypass reports whether a key is on the allowlist. An allowlisted call
	// is admitted at once (Decision.Bypassed) and counts nothing. A
	// Composite asks about each "<dimension>:<value>"; one allowlisted value
	// bypasses the whole call. nil: no allowlist.
	Bypass func(key string) bool
	// OnError decides calls made while Redis is failing, when Fallback is
	// nil. A context's ending is never masked: a call on an ended context
	// (within the Backoff too) is not decided; it returns an error matching
	// ctx.Err() and counts nothing. A call that fails after its context
	// ended (ctx.Err() set, or its deadline passed) is not decided either:
	// it returns an error matching the context's ending
	// (context.DeadlineExceeded once the deadline has passed, even before
	// ctx.Err() says so) joined with the *RedisError it met, and starts the
	// Backoff only as the DeadlineFailures-th ending by deadline in a row. A
	// call that fails while its context is live is decided, and starts the
	// Backoff, so the calls that follow are decided at once.
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
	// every request a timeout. A failure met while the call's context is
	// live starts it at once. A failure of a call whose context has ended
	// starts it only when the context ended by its deadline and the call is
	// the DeadlineFailures-th such ending in a row (cancellation never
	// does). The first call after it tries Redis again. Default 100 ms;
	// negative means always try Redis.
	Backoff time.Duration
	// OnRedisError, if set, is told of every Redis failure (for logging and
	// metrics): each failure met while the call's context is live, and the
	// DeadlineFailures-th ending by deadline in a row and each one after it
	// until Redis answers (a *RedisError saying how many). A CROSSSLOT
	// reply is the caller's error, not a Redis failure, and neither is any
	// other failure of a call whose context has ended. It must be safe for
	// concurrent use.
	OnRedisError func(error)
	// DeadlineFailures is how many calls in a row ended by their context's
	// deadline before Redis answered them, with no Redis reply to any call
	// in between, make a Redis failure: the last of them starts the Backoff
	// and is told to OnRedisError, and so is each such ending after it
	// until Redis answers a call. A call ended by its deadline is one that
	// failed, whatever the client's error (a read timeout at the caller's
	// deadline, the context's error while the client waited to send it
	// again), once ctx.Err() is context.DeadlineExceeded or its deadline
	// has passed. Any reply from Redis ends the run: a decision, a CROSSSLOT
	// reply, an error reply (redis.Error) or a malformed reply, also one
	// that reaches a call after its deadline (that call does not count). A
	// call ended by cancellation (context.Canceled) never counts, nor does
	// a call whose context had ended before it was made (Redis is not
	// asked). The call that ends by its deadline is never decided by the
	// policy, whatever the count: it returns an error matching
	// context.DeadlineExceeded. Default 3; 1 makes every such ending a
	// Redis failure; negative means a deadline never is one.
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
// by their deadline is over. A plain store: checking the count first
// would let an ending counted between the check and the store outlive the
// reply.
func (g *guard) answered() {
	g.deadlines.Store(0)
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

// ending reports how ctx has ended: ctx.Err(), or
// context.DeadlineExceeded once its deadline has passed even if ctx.Err()
// is not set yet (a client whose read times out at the caller's deadline
// may return a moment before the context's timer fires); nil while it is
// live.
func ending(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !dl.After(time.Now()) {
		return context.DeadlineExceeded
	}
	return nil
}

// failed handles a call that got err instead of a usable reply and returns
// the error to report, and whether the policy may decide instead. replied
// says Redis answered the call (a malformed reply); an error reply
// (redis.Error) is an answer too. Any answer ends the run of calls ended
// by their deadline. The server's CROSSSLOT reply is the caller's
// ErrCrossSlot (no outage: no backoff, no report), joined with the
// context's ending if it has ended. A failure of a call whose context has
// ended (see ending) is the caller's ending, whatever the error: no
// decision, the ending joined with the *RedisError; an ending by deadline
// before Redis answered counts toward DeadlineFailures, whose
// DeadlineFailures-th in a row starts the Backoff and is told to
// OnRedisError; cancellation never counts. Any other failure (the context
// still live) starts the Backoff and is told to OnRedisError at once, and
// the policy may decide the call.
func (g *guard) failed(ctx context.Context, err error, replied bool) (error, bool) {
	var reply redis.Error
	if replied || errors.As(err, &reply) {
		replied = true
		g.answered()
	}
	end := ending(ctx)
	if crossSlot(err) {
		cerr := fmt.Errorf("%w: %w", ErrCrossSlot, err)
		if end != nil {
			return errors.Join(cerr, end), false
		}
		return cerr, false
	}
	rerr := &RedisError{Err: err}
	if end == nil {
		g.down(rerr)
		return rerr, true
	}
	if !replied && errors.Is(end, context.DeadlineExceeded) && g.p.DeadlineFailures > 0 {
		if n := g.deadlines.Add(1); n >= int64(g.p.DeadlineFailures) {
			g.down(&RedisError{Err: fmt.Errorf("%d calls in a row ended by their deadline before Redis answered: %w", n, err)})
		}
	}
	return errors.Join(rerr, end), false
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
