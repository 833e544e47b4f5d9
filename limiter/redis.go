package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/typednil"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/observe"
)

// One script per algorithm; each decides one or more keys all-or-nothing,
// reading Redis server TIME itself.
var scripts = [...]*redis.Script{
	GCRA:          redis.NewScript(lua.Script("limiter_gcra.lua")),
	FixedWindow:   redis.NewScript(lua.Script("limiter_fixed.lua")),
	SlidingWindow: redis.NewScript(lua.Script("limiter_sliding.lua")),
}

// resetScript deletes keys of any algorithm.
var resetScript = redis.NewScript(lua.Script("limiter_reset.lua"))

// RedisConfig configures a Redis limiter. The zero value of every field but
// Limit means its default.
type RedisConfig struct {
	// Limit applies to every key. Limit.Rate is required.
	Limit Limit
	// Algorithm counts events; default GCRA.
	Algorithm Algorithm
	// Prefix starts every Redis key: "<Prefix>:<algorithm>:{<key>}".
	// Default "limiter". It may not contain '{' or '}'.
	Prefix string
	// Policy handles allowlisted keys and Redis failures.
	Policy Policy
	// Observer receives every decision (package observe), synchronously;
	// the zero value reports nothing.
	Observer observe.Observer
}

// Redis is a distributed limiter: every node sharing the Redis shares the
// counts. Each call is one script round trip that reads Redis server time,
// so node clocks play no part. Each key lives in its own hash slot, so it
// works on Redis Cluster. Safe for concurrent use.
type Redis struct {
	e      engine
	prefix string // "<Prefix>:<algorithm>:"
	limit  Limit
	obs    observe.Observer
}

// NewRedis returns a Redis limiter over rdb (a *redis.Client,
// *redis.ClusterClient, *redis.Ring or any redis.Scripter), or an error
// wrapping ErrInvalid if cfg is not usable.
func NewRedis(rdb redis.Scripter, cfg RedisConfig) (*Redis, error) {
	e, prefix, err := newEngine(rdb, cfg.Algorithm, cfg.Prefix, cfg.Policy, "RedisConfig")
	if err != nil {
		return nil, err
	}
	lim := cfg.Limit.resolved()
	if err := lim.validate("RedisConfig.Limit", cfg.Algorithm); err != nil {
		return nil, err
	}
	return &Redis{e: e, prefix: prefix, limit: lim, obs: cfg.Observer}, nil
}

// Allow is AllowN(ctx, key, 1).
func (r *Redis) Allow(ctx context.Context, key string) (Decision, error) {
	return r.AllowN(ctx, key, 1)
}

// AllowN reports whether n events may happen now for key and, if so, counts
// them, in one round trip. key must pass ValidateKey; 1 <= n <= the limit's
// Burst (GCRA) or Rate (windows). Redis failures are handled by the Policy.
// A call on an ended context (ctx.Err() set, or its deadline passed before
// the context's timer said so) returns the context's ending and counts
// nothing, even during the Policy's Backoff.
func (r *Redis) AllowN(ctx context.Context, key string, n int) (Decision, error) {
	if r.obs.Limit == nil {
		return r.allowN(ctx, key, n)
	}
	start := time.Now()
	d, err := r.allowN(ctx, key, n)
	r.obs.Limit(ctx, observe.Limit{Limiter: "redis", N: n, Allowed: d.Allowed, Err: err, Duration: time.Since(start)})
	return d, err
}

func (r *Redis) allowN(ctx context.Context, key string, n int) (Decision, error) {
	if err := ValidateKey("key", key); err != nil {
		return Decision{}, err
	}
	if err := validateN(n, r.limit.capacity(r.e.alg)); err != nil {
		return Decision{}, err
	}
	if err := ending(ctx); err != nil {
		return Decision{}, err
	}
	if r.e.g.bypassed(key) {
		return Decision{Allowed: true, Remaining: math.MaxInt64, Bypassed: true}, nil
	}
	keys := []string{r.prefix + "{" + key + "}"}
	args := make([]any, 1, 4)
	args[0] = n
	args = appendLimit(args, r.limit)
	return r.e.run(ctx, keys, args, []string{key}, []string{""}, n)
}

// maxN is the most events one call may ask for: the limit's capacity.
func (r *Redis) maxN() int64 { return r.limit.capacity(r.e.alg) }

// Reset clears key's count, so that its next call is decided as a fresh
// key's would be, in one round trip. If the Policy's Fallback is a
// Resetter (a *Local is), key is cleared there too, so a reset key is also
// fresh while Redis is down. key must pass ValidateKey. Reset always tries
// Redis, even within the Policy's Backoff; a failure is a *RedisError
// (matching ErrUnavailable), never a policy decision, and a context that
// has already ended (its deadline passed, too) clears nothing and returns
// the context's ending.
func (r *Redis) Reset(ctx context.Context, key string) error {
	if err := ValidateKey("key", key); err != nil {
		return err
	}
	return r.e.reset(ctx, [][]string{{r.prefix + "{" + key + "}"}}, []string{key})
}

// engine runs one algorithm's script under a Policy.
type engine struct {
	rdb redis.Scripter
	alg Algorithm
	g   *guard

	crossSlotOK bool // Composite: keys may span slots (no Cluster)
}

func newEngine(rdb redis.Scripter, alg Algorithm, prefix string, p Policy, cfgName string) (engine, string, error) {
	if typednil.Is(rdb) {
		return engine{}, "", invalid(cfgName+" client", fmt.Sprintf("nil redis.Scripter (%T)", rdb))
	}
	if alg < GCRA || alg > SlidingWindow {
		return engine{}, "", invalid(cfgName+".Algorithm", alg.String()+" is unknown")
	}
	if prefix == "" {
		prefix = "limiter"
	}
	if err := ValidateKey(cfgName+".Prefix", prefix); err != nil {
		return engine{}, "", err
	}
	g, err := newGuard(p, cfgName+".Policy")
	if err != nil {
		return engine{}, "", err
	}
	return engine{rdb: rdb, alg: alg, g: g}, prefix + ":" + alg.String() + ":", nil
}

// appendLimit appends a limit's script arguments: rate, period (µs), burst.
func appendLimit(args []any, l Limit) []any {
	return append(args, l.Rate, l.Period.Microseconds(), l.Burst)
}

// run calls the script on keys, or lets the Policy decide while Redis is
// failing. fbKeys are the keys a Fallback is asked about and names the
// dimension each key stands for (both aligned with keys).
func (e *engine) run(ctx context.Context, keys []string, args []any, fbKeys, names []string, n int) (Decision, error) {
	if e.g.skip() {
		return e.g.degraded(ctx, ErrUnavailable, fbKeys, names, n)
	}
	reply, err := scripts[e.alg].Run(ctx, e.rdb, keys, args...).Slice()
	replied := err == nil
	if replied {
		e.g.answered()
		d, perr := parseReply(reply, names)
		if perr == nil {
			return d, nil
		}
		err = perr
	}
	cause, decide := e.g.failed(ctx, err, replied)
	if !decide {
		return Decision{}, cause
	}
	return e.g.degraded(ctx, cause, fbKeys, names, n)
}

// reset clears groups of keys, one script call per group (each group is
// in one hash slot), after clearing fbKeys in the Fallback if it is a
// Resetter.
func (e *engine) reset(ctx context.Context, groups [][]string, fbKeys []string) error {
	if err := ending(ctx); err != nil {
		return err
	}
	var errs []error
	if rs, ok := e.g.p.Fallback.(Resetter); ok {
		for _, k := range fbKeys {
			if err := rs.Reset(ctx, k); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, keys := range groups {
		n, err := resetScript.Run(ctx, e.rdb, keys).Int64()
		replied := err == nil
		if replied {
			e.g.answered()
		}
		if replied && (n < 0 || n > int64(len(keys))) {
			err = fmt.Errorf("unexpected reset script reply %d", n)
		}
		if err != nil {
			cause, _ := e.g.failed(ctx, err, replied)
			return errors.Join(append(errs, cause)...)
		}
	}
	return errors.Join(errs...)
}

// parseReply reads {allowed, remaining, retry_us, denied_index, reset_us}.
func parseReply(reply []any, names []string) (Decision, error) {
	if len(reply) != 5 {
		return Decision{}, fmt.Errorf("unexpected script reply %v", reply)
	}
	var v [5]int64
	for i, x := range reply {
		n, ok := x.(int64)
		if !ok {
			return Decision{}, fmt.Errorf("unexpected script reply %v", reply)
		}
		v[i] = n
	}
	reset := max(time.Duration(v[4])*time.Microsecond, 0)
	if v[0] == 1 {
		return Decision{Allowed: true, Remaining: max(v[1], 0), ResetAfter: reset}, nil
	}
	if v[3] < 1 || v[3] > int64(len(names)) {
		return Decision{}, fmt.Errorf("unexpected script reply %v", reply)
	}
	retry := max(time.Duration(v[2])*time.Microsecond, time.Microsecond)
	return Decision{RetryAfter: retry, ResetAfter: max(reset, retry), DeniedBy: names[v[3]-1]}, nil
}
