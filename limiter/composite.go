package limiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/observe"
)

// MaxDimensions is the most dimensions a Composite may have.
const MaxDimensions = 16

// Dimension is one limit of a Composite, e.g. {Name: "user", Limit: ...}.
type Dimension struct {
	// Name identifies the dimension in keys and in Decision.DeniedBy; it
	// passes ValidateKey and has no ':'. Names are unique in a Composite.
	Name  string
	Limit Limit
}

// CompositeConfig configures a Composite. Dimensions is required; the zero
// value of every other field means its default.
type CompositeConfig struct {
	// Dimensions are decided together, in this order, in one script.
	Dimensions []Dimension
	// Algorithm counts every dimension; default GCRA.
	Algorithm Algorithm
	// Prefix starts every Redis key; default "limiter". See Request.Tag for
	// the key layout.
	Prefix string
	// AllowCrossSlot lets a call without a Tag use keys from several hash
	// slots in one script. Set it only for a single Redis server or
	// Sentinel, where slots do not exist: NewComposite refuses it on a
	// *redis.ClusterClient. On a Cluster it cannot see (a client behind a
	// wrapper), a call spanning slots gets the server's CROSSSLOT reply,
	// returned as ErrCrossSlot: it counts nothing and, being the caller's
	// error and not an outage, is never decided by the Policy nor starts its
	// Backoff. Default false: the call fails with ErrCrossSlot and counts
	// nothing.
	AllowCrossSlot bool
	// Policy handles allowlisted values and Redis failures.
	Policy Policy
	// Observer receives every decision (package observe), synchronously;
	// the zero value reports nothing.
	Observer observe.Observer
}

// Request names the values a call is counted against, one per Dimension.
type Request struct {
	// Values[i] is the value of Dimensions[i] (a user ID, a SKU, an IP...);
	// "" leaves that dimension out of this call. At least one is set.
	Values []string
	// Tag, if set, is the Redis Cluster hash tag of every key of the call:
	// "<Prefix>:<algorithm>:{<Tag>}:<dimension>:<value>". One slot holds
	// them all, so the call is one atomic script on any deployment. The tag
	// is part of each counter's identity: a counter is shared only by calls
	// with the same tag. So tag with what every request counted together
	// shares: the user ID when every dimension is per user (user, user+SKU),
	// a constant (e.g. the sale's ID) when dimensions span users (SKU, IP)
	// — then all of that limiter's counters live on one Cluster shard.
	// The Fallback keeps tags apart as well (see Policy.Fallback).
	//
	// Without a Tag each key is
	// "<Prefix>:<algorithm>:dim:{<dimension>:<value>}" in its own slot,
	// which is one atomic script only when all keys share a slot or
	// AllowCrossSlot is set; otherwise the call fails with ErrCrossSlot.
	//
	// No key of a Composite is a Redis limiter's key, whatever the keys,
	// values and tags, so the two may share a Prefix.
	Tag string
}

// untagged starts the part of an untagged Composite key after
// "<Prefix>:<algorithm>:". A Redis limiter's key and a tagged key have '{'
// there, and no key, value or tag may contain a brace, so no untagged key
// is ever one of theirs.
const untagged = "dim:"

// Composite is a distributed limiter over several dimensions (e.g. user+SKU,
// user, SKU, IP, device) decided in one script round trip, all-or-nothing:
// a call refused by any dimension counts nothing in the others. It reads
// Redis server time. Safe for concurrent use.
type Composite struct {
	e      engine
	prefix string
	dims   []Dimension // limits resolved
	obs    observe.Observer
}

// NewComposite returns a Composite over rdb, or an error wrapping ErrInvalid
// if cfg is not usable.
func NewComposite(rdb redis.Scripter, cfg CompositeConfig) (*Composite, error) {
	e, prefix, err := newEngine(rdb, cfg.Algorithm, cfg.Prefix, cfg.Policy, "CompositeConfig")
	if err != nil {
		return nil, err
	}
	if len(cfg.Dimensions) == 0 || len(cfg.Dimensions) > MaxDimensions {
		return nil, invalid("CompositeConfig.Dimensions", "need 1 to "+strconv.Itoa(MaxDimensions))
	}
	dims := make([]Dimension, len(cfg.Dimensions))
	seen := make(map[string]bool, len(dims))
	for i, d := range cfg.Dimensions {
		field := "CompositeConfig.Dimensions[" + strconv.Itoa(i) + "]"
		if err := ValidateKey(field+".Name", d.Name); err != nil {
			return nil, err
		}
		if strings.Contains(d.Name, ":") || seen[d.Name] {
			return nil, invalid(field+".Name", strconv.Quote(d.Name)+" contains ':' or repeats a name")
		}
		seen[d.Name] = true
		d.Limit = d.Limit.resolved()
		if err := d.Limit.validate(field+".Limit", cfg.Algorithm); err != nil {
			return nil, err
		}
		dims[i] = d
	}
	if _, ok := rdb.(*redis.ClusterClient); ok && cfg.AllowCrossSlot {
		return nil, invalid("CompositeConfig.AllowCrossSlot", "set on a *redis.ClusterClient, where keys of several slots are never one script")
	}
	c := &Composite{e: e, prefix: prefix, dims: dims, obs: cfg.Observer}
	c.e.crossSlotOK = cfg.AllowCrossSlot
	return c, nil
}

// Allow is AllowN(ctx, req, 1).
func (c *Composite) Allow(ctx context.Context, req Request) (Decision, error) {
	return c.AllowN(ctx, req, 1)
}

// AllowN reports whether n events may happen now in every dimension req
// names and, if so, counts them in all of them; otherwise nothing is
// counted and DeniedBy names the first refusing dimension. ResetAfter is
// the longest of the named dimensions'. Values and Tag must pass
// ValidateKey; 1 <= n <= every named dimension's capacity. A call on an
// ended context (ctx.Err() set, or its deadline passed before the
// context's timer said so) returns the context's ending and counts
// nothing, even during the Policy's Backoff.
func (c *Composite) AllowN(ctx context.Context, req Request, n int) (Decision, error) {
	if c.obs.Limit == nil {
		return c.allowN(ctx, req, n)
	}
	start := time.Now()
	d, err := c.allowN(ctx, req, n)
	c.obs.Limit(ctx, observe.Limit{Limiter: "composite", N: n, Allowed: d.Allowed, Err: err, Duration: time.Since(start)})
	return d, err
}

func (c *Composite) allowN(ctx context.Context, req Request, n int) (Decision, error) {
	k, err := c.keys(req)
	if err != nil {
		return Decision{}, err
	}
	args := make([]any, 1, 1+3*len(k.dims))
	args[0] = n
	capN := int64(math.MaxInt64)
	for _, i := range k.dims {
		args = appendLimit(args, c.dims[i].Limit)
		capN = min(capN, c.dims[i].Limit.capacity(c.e.alg))
	}
	if err := validateN(n, capN); err != nil {
		return Decision{}, err
	}
	if err := ending(ctx); err != nil {
		return Decision{}, err
	}
	if c.e.g.bypassed(k.ids...) {
		return Decision{Allowed: true, Remaining: math.MaxInt64, Bypassed: true}, nil
	}
	if k.spread && !c.e.crossSlotOK {
		return Decision{}, ErrCrossSlot
	}
	return c.e.run(ctx, k.keys, args, k.fb, k.names, n)
}

// Reset clears the counts of every dimension req names (Values left ""
// are untouched), so that each is decided as a fresh one would be; a
// Request with one value resets one dimension. Values and Tag are checked
// as in AllowN, and the keys are the ones AllowN counts on (same Tag, same
// keys). The keys are cleared in one round trip when they share a hash
// slot (or AllowCrossSlot is set); otherwise one per key, which is not
// atomic across them but never fails with ErrCrossSlot. Fallback keys and
// errors are as for Redis.Reset, except that the server's CROSSSLOT reply
// (AllowCrossSlot on a Cluster) is ErrCrossSlot.
func (c *Composite) Reset(ctx context.Context, req Request) error {
	k, err := c.keys(req)
	if err != nil {
		return err
	}
	groups := [][]string{k.keys}
	if k.spread && !c.e.crossSlotOK {
		groups = make([][]string, len(k.keys))
		for i := range k.keys {
			groups[i] = k.keys[i : i+1]
		}
	}
	return c.e.reset(ctx, groups, k.fb)
}

// callKeys are the keys of one call, aligned: the Redis key, the
// "<dimension>:<value>" id (for Bypass), the Fallback key, the dimension's
// name and index.
type callKeys struct {
	keys, ids, fb, names []string
	dims                 []int
	spread               bool // untagged keys in more than one hash slot
}

// fallbackKey is the key a Fallback counts one dimension's value of a call
// on: "<dimension>:<value>" without a tag, and with one
// ":<len(tag)>:<tag>:<dimension>:<value>" (len in decimal bytes), so that,
// as in Redis, calls share a counter only when they share the tag. A key
// longer than MaxKeyLen (which a Local refuses) is "#" followed by the hex
// SHA-256 of the key instead. No two of these keys are the same (a
// dimension's name is not empty and has no ':', so only a tagged key
// begins with one; a hashed key has none), and none has a brace, which a
// Redis Fallback refuses.
func fallbackKey(tag, dim, value string) string {
	k := dim + ":" + value
	if tag != "" {
		k = ":" + strconv.Itoa(len(tag)) + ":" + tag + ":" + k
	}
	if len(k) > MaxKeyLen {
		sum := sha256.Sum256([]byte(k))
		return "#" + hex.EncodeToString(sum[:])
	}
	return k
}

// keys validates req and returns its keys.
func (c *Composite) keys(req Request) (callKeys, error) {
	if len(req.Values) != len(c.dims) {
		return callKeys{}, invalid("Request.Values", "has "+strconv.Itoa(len(req.Values))+" values for "+strconv.Itoa(len(c.dims))+" dimensions")
	}
	if req.Tag != "" {
		if err := ValidateKey("Request.Tag", req.Tag); err != nil {
			return callKeys{}, err
		}
	}
	k := callKeys{
		keys:  make([]string, 0, len(c.dims)),
		ids:   make([]string, 0, len(c.dims)),
		fb:    make([]string, 0, len(c.dims)),
		names: make([]string, 0, len(c.dims)),
		dims:  make([]int, 0, len(c.dims)),
	}
	first := 0
	for i, v := range req.Values {
		if v == "" {
			continue
		}
		d := c.dims[i]
		if err := ValidateKey("Request.Values["+strconv.Itoa(i)+"]", v); err != nil {
			return callKeys{}, err
		}
		id := d.Name + ":" + v
		if req.Tag != "" {
			k.keys = append(k.keys, c.prefix+"{"+req.Tag+"}:"+id)
		} else {
			k.keys = append(k.keys, c.prefix+untagged+"{"+id+"}")
			if s := keyslot.Slot(id); len(k.ids) == 0 {
				first = s
			} else if s != first {
				k.spread = true
			}
		}
		k.ids = append(k.ids, id)
		k.fb = append(k.fb, fallbackKey(req.Tag, d.Name, v))
		k.names = append(k.names, d.Name)
		k.dims = append(k.dims, i)
	}
	if len(k.keys) == 0 {
		return callKeys{}, invalid("Request.Values", "all empty")
	}
	return k, nil
}
