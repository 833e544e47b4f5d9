package limiter

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
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
	// Sentinel, where slots do not exist; on Redis Cluster such a call would
	// fail with CROSSSLOT. Default false: the call fails with ErrCrossSlot
	// and counts nothing.
	AllowCrossSlot bool
	// Policy handles allowlisted values and Redis failures.
	Policy Policy
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
	//
	// Without a Tag each key is "<Prefix>:<algorithm>:{<dimension>:<value>}"
	// in its own slot, which is one atomic script only when all keys share
	// a slot or AllowCrossSlot is set; otherwise the call fails with
	// ErrCrossSlot.
	Tag string
}

// Composite is a distributed limiter over several dimensions (e.g. user+SKU,
// user, SKU, IP, device) decided in one script round trip, all-or-nothing:
// a call refused by any dimension counts nothing in the others. It reads
// Redis server time. Safe for concurrent use.
type Composite struct {
	e      engine
	prefix string
	dims   []Dimension // limits resolved
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
	c := &Composite{e: e, prefix: prefix, dims: dims}
	if cfg.AllowCrossSlot {
		c.e.crossSlotOK = true
	}
	return c, nil
}

// Allow is AllowN(ctx, req, 1).
func (c *Composite) Allow(ctx context.Context, req Request) (Decision, error) {
	return c.AllowN(ctx, req, 1)
}

// AllowN reports whether n events may happen now in every dimension req
// names and, if so, counts them in all of them; otherwise nothing is
// counted and DeniedBy names the first refusing dimension. Values and Tag
// must pass ValidateKey; 1 <= n <= every named dimension's capacity.
func (c *Composite) AllowN(ctx context.Context, req Request, n int) (Decision, error) {
	if len(req.Values) != len(c.dims) {
		return Decision{}, invalid("Request.Values", "has "+strconv.Itoa(len(req.Values))+" values for "+strconv.Itoa(len(c.dims))+" dimensions")
	}
	if req.Tag != "" {
		if err := ValidateKey("Request.Tag", req.Tag); err != nil {
			return Decision{}, err
		}
	}
	var (
		keys   = make([]string, 0, len(c.dims))
		fb     = make([]string, 0, len(c.dims))
		names  = make([]string, 0, len(c.dims))
		args   = make([]any, 1, 1+3*len(c.dims))
		capN   = int64(math.MaxInt64)
		first  int
		spread bool
	)
	args[0] = n
	for i, v := range req.Values {
		if v == "" {
			continue
		}
		d := c.dims[i]
		if err := ValidateKey("Request.Values["+strconv.Itoa(i)+"]", v); err != nil {
			return Decision{}, err
		}
		id := d.Name + ":" + v
		if req.Tag != "" {
			keys = append(keys, c.prefix+"{"+req.Tag+"}:"+id)
		} else {
			keys = append(keys, c.prefix+"{"+id+"}")
			if s := keyslot.Slot(id); len(fb) == 0 {
				first = s
			} else if s != first {
				spread = true
			}
		}
		fb = append(fb, id)
		names = append(names, d.Name)
		args = appendLimit(args, d.Limit)
		capN = min(capN, d.Limit.capacity(c.e.alg))
	}
	if len(keys) == 0 {
		return Decision{}, invalid("Request.Values", "all empty")
	}
	if err := validateN(n, capN); err != nil {
		return Decision{}, err
	}
	if c.e.g.bypassed(fb...) {
		return Decision{Allowed: true, Remaining: math.MaxInt64, Bypassed: true}, nil
	}
	if spread && !c.e.crossSlotOK {
		return Decision{}, ErrCrossSlot
	}
	return c.e.run(ctx, keys, args, fb, names, n)
}
