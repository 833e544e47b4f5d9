package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/internal/typednil"
	"github.com/stockguard/stockguard/observe"
)

// LocalConfig configures a Local limiter. The zero value of every field but
// Limit means its default.
type LocalConfig struct {
	// Limit applies to every key. Limit.Rate is required, and may be at
	// most one event per nanosecond (Rate <= Period in ns), the Clock's
	// resolution.
	Limit Limit
	// MaxKeys bounds memory: at most this many keys are tracked (each costs
	// roughly 200 bytes plus its length), over all shards together. A key is
	// dropped only when MaxKeys keys are tracked and a new one comes: then
	// one key goes, the least recently used of the new key's shard (of the
	// next shard that tracks any, if that one tracks none), never all at
	// once; a dropped key starts again with a full bucket. Keep MaxKeys well
	// above the keys active within one Burst/Rate refill time. Default
	// 100,000.
	MaxKeys int
	// Shards splits the keys over this many independently locked LRUs
	// (rounded down to a power of two, at most MaxKeys). Default 64; at
	// most MaxShards.
	Shards int
	// Clock tells the time; default the wall clock.
	Clock Clock
	// Observer receives every decision (package observe), synchronously;
	// the zero value reports nothing.
	Observer observe.Observer
}

// MaxShards is the largest LocalConfig.Shards.
const MaxShards = 1 << 16

// Local is an in-process keyed token bucket (golang.org/x/time/rate), with
// bounded memory. Counts are per process: use it at the gateway, or as the
// Fallback of a Redis-backed limiter. Safe for concurrent use; keys are
// spread over sharded locks, so there is no global lock on the hot path.
// Its buckets count in x/time/rate's floating-point seconds: exact to
// about one part in 10^16, so at the longest periods (months) an event
// may pass a few nanoseconds before a whole interval has passed (the
// Redis limiters count in whole microseconds, exactly).
type Local struct {
	limit  rate.Limit
	burst  int
	every  float64 // seconds per token
	clock  Clock
	seed   maphash.Seed
	mask   uint64
	shards []localShard
	obs    observe.Observer

	maxKeys int64
	keys    atomic.Int64 // keys tracked, and slots taken for keys being added
}

// bucket is one key's token bucket. mu orders its decisions, each on the
// later of its Clock reading and the previous decision's time (last), so
// the bucket's time never goes back: x/time/rate would take an earlier time
// as its new start and count the refill since then a second time.
type bucket struct {
	mu   sync.Mutex
	last time.Time
	lim  *rate.Limiter
}

type localShard struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, *bucket]
	_   [48]byte // keep shards on separate cache lines
}

// NewLocal returns a Local limiter, or an error wrapping ErrInvalid if cfg
// is not usable.
func NewLocal(cfg LocalConfig) (*Local, error) {
	lim := cfg.Limit.resolved()
	if err := lim.validate("LocalConfig.Limit", GCRA); err != nil {
		return nil, err
	}
	if lim.Rate > lim.Period.Nanoseconds() {
		return nil, invalid("LocalConfig.Limit", "faster than one event per nanosecond")
	}
	if cfg.Clock != nil && typednil.Is(cfg.Clock) {
		return nil, invalid("LocalConfig.Clock", "a nil "+fmt.Sprintf("%T", cfg.Clock))
	}
	if cfg.MaxKeys < 0 {
		return nil, invalid("LocalConfig.MaxKeys", "negative")
	}
	if cfg.Shards < 0 || cfg.Shards > MaxShards {
		return nil, invalid("LocalConfig.Shards", strconv.Itoa(cfg.Shards)+" is outside [0, "+strconv.Itoa(MaxShards)+"]")
	}
	maxKeys := cfg.MaxKeys
	if maxKeys == 0 {
		maxKeys = 100_000
	}
	shards := cfg.Shards
	if shards == 0 {
		shards = 64
	}
	shards = min(shards, maxKeys)
	shards = 1 << (bits.Len(uint(shards)) - 1) // power of two, <= shards
	l := &Local{
		obs:     cfg.Observer,
		limit:   rate.Limit(float64(lim.Rate) / lim.Period.Seconds()),
		burst:   int(min(lim.Burst, math.MaxInt32)),
		clock:   cfg.Clock,
		seed:    maphash.MakeSeed(),
		mask:    uint64(shards - 1),
		shards:  make([]localShard, shards),
		maxKeys: int64(maxKeys),
	}
	l.every = 1 / float64(l.limit)
	if l.clock == nil {
		l.clock = systemClock{}
	}
	for i := range l.shards {
		// Each shard may hold every key; MaxKeys is kept over all of them.
		lru, err := simplelru.NewLRU[string, *bucket](maxKeys, nil)
		if err != nil {
			return nil, invalid("LocalConfig.MaxKeys", err.Error())
		}
		l.shards[i].lru = lru
	}
	return l, nil
}

// Allow is AllowN(ctx, key, 1).
func (l *Local) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n events may happen now for key (its bucket holds
// n tokens) and, if so, takes them. key must be non-empty and at most MaxKeyLen
// bytes; 1 <= n <= Burst. It never fails for any other reason and does not
// allocate once key is tracked. Times are on the Clock, and a key's time
// never goes back: a call whose Clock reading is earlier than one already
// used on the key (a goroutine preempted after reading it, or a Clock set
// back) is decided at that later time. A refused call's
// RetryAfter is exact on the bucket's arithmetic: the same call passes at
// now+RetryAfter and not a nanosecond earlier (likewise its ResetAfter, the
// time until the bucket is full again). An allowed call's ResetAfter is
// computed from the rate alone, so as not to slow the hot path, and may be
// off by a few nanoseconds of float rounding.
func (l *Local) AllowN(ctx context.Context, key string, n int) (Decision, error) {
	if l.obs.Limit == nil {
		return l.allowN(ctx, key, n)
	}
	start := time.Now()
	d, err := l.allowN(ctx, key, n)
	l.obs.Limit(ctx, observe.Limit{Limiter: "local", N: n, Allowed: d.Allowed, Err: err, Duration: time.Since(start)})
	return d, err
}

func (l *Local) allowN(_ context.Context, key string, n int) (Decision, error) {
	if key == "" || len(key) > MaxKeyLen {
		return Decision{}, invalid("key", "must be 1 to 256 bytes")
	}
	if n < 1 || n > l.burst {
		return Decision{}, validateN(n, int64(l.burst))
	}
	now := l.clock.Now()
	b := l.bucket(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.last) {
		now = b.last // read before a decision that is already made
	} else {
		b.last = now
	}
	lim := b.lim
	// A call passes when the bucket holds n tokens: the predicate until
	// searches on (x/time/rate alone would also pass a call whose missing
	// fraction of a token the rate adds in under a nanosecond).
	have := lim.TokensAt(now)
	if have >= float64(n) {
		lim.AllowN(now, n) // passes: the bucket holds n
		tokens := have - float64(n)
		return Decision{Allowed: true, Remaining: int64(max(tokens, 0)), ResetAfter: l.estimate(tokens, float64(l.burst))}, nil
	}
	return Decision{RetryAfter: l.until(lim, now, have, float64(n)), ResetAfter: l.until(lim, now, have, float64(l.burst))}, nil
}

// estimate is how long the rate takes to add want-have tokens, rounded up
// to a whole nanosecond; 0 if have >= want.
func (l *Local) estimate(have, want float64) time.Duration {
	if have >= want {
		return 0
	}
	return max(time.Duration(math.Ceil((want-have)*l.every*float64(time.Second))), 1)
}

// until is the least wait after which lim holds want tokens, given it has
// have now; 0 if have >= want. It is a binary search on the bucket's own
// arithmetic (TokensAt), bracketed around the estimate from the rate, so
// the same call passes at now+until and not a nanosecond earlier however
// far float rounding puts the estimate off (on a long Period, by far more
// than a nanosecond).
func (l *Local) until(lim *rate.Limiter, now time.Time, have, want float64) time.Duration {
	if have >= want {
		return 0
	}
	holds := func(d time.Duration) bool { return lim.TokensAt(now.Add(d)) >= want }
	// Keep holds(hi) and, as holds(0) is false, !holds(lo).
	hi := l.estimate(have, want)
	step := hi>>20 + 1
	lo := hi - step
	for lo > 0 && holds(lo) {
		hi, step = lo, step*2
		lo -= step
	}
	lo = max(lo, 0)
	for !holds(hi) { // ends: the bucket fills up to Burst >= want
		lo, step = hi, step*2
		hi += step
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if holds(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// maxN is the most events one call may ask for: Burst.
func (l *Local) maxN() int64 { return int64(l.burst) }

// Reset forgets key: its next call finds a full bucket, as a new key
// would. key must be non-empty and at most MaxKeyLen bytes. It does no I/O
// and fails only on an invalid key.
func (l *Local) Reset(_ context.Context, key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return invalid("key", "must be 1 to 256 bytes")
	}
	s := &l.shards[l.shard(key)]
	s.mu.Lock()
	removed := s.lru.Remove(key)
	s.mu.Unlock()
	if removed {
		l.keys.Add(-1)
	}
	return nil
}

// shard is the index of key's shard.
func (l *Local) shard(key string) uint64 {
	return maphash.String(l.seed, key) & l.mask
}

// bucket returns key's bucket, creating a full one if the key is not
// tracked. Whether the key is tracked and the slot a new key takes are
// decided under its shard's lock, so concurrent first calls of one key
// add it once, and a key is dropped only for a key that is new while
// MaxKeys are tracked.
func (l *Local) bucket(key string) *bucket {
	home := l.shard(key)
	s := &l.shards[home]
	for {
		s.mu.Lock()
		b, ok := s.lru.Get(key)
		if !ok && (l.take() || l.dropOldest(s)) {
			b, ok = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}, true
			s.lru.Add(key, b)
		}
		s.mu.Unlock()
		if ok {
			return b
		}
		// Every slot is taken and this shard tracks no key: drop one of
		// another shard, and look again.
		if !l.evict(home) {
			runtime.Gosched() // every slot is taken by a key still being added
		}
	}
}

// take takes one of the MaxKeys slots, if one is free.
func (l *Local) take() bool {
	for {
		n := l.keys.Load()
		if n >= l.maxKeys {
			return false
		}
		if l.keys.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// dropOldest drops the least recently used key of s, whose lock the caller
// holds, leaving its slot to the key the caller adds; false if s tracks
// none.
func (l *Local) dropOldest(s *localShard) bool {
	_, _, ok := s.lru.RemoveOldest()
	return ok
}

// evict drops the least recently used key of shard home, or of the next
// shard that tracks any, and reports whether it dropped one.
func (l *Local) evict(home uint64) bool {
	for i := range uint64(len(l.shards)) {
		s := &l.shards[(home+i)&l.mask]
		s.mu.Lock()
		_, _, ok := s.lru.RemoveOldest()
		s.mu.Unlock()
		if ok {
			l.keys.Add(-1)
			return true
		}
	}
	return false
}

// Len returns how many keys are tracked (a key still being added by a
// concurrent call counts); never more than MaxKeys.
func (l *Local) Len() int {
	return int(l.keys.Load())
}
