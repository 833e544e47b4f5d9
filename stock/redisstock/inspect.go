package redisstock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// stateFields are read from a SKU's state hash, in parseState's order.
var stateFields = []string{"avail", "held", "sold", "limit", "hold", "ver", "epoch", "gen", "max_ms"}

// Fence names one administrative state of a SKU's gate state, for a
// compare-and-set ([Store.Adjust], [Store.Relist]). Gen is drawn at random
// (crypto/rand) when the state is created (a PutOnSale of a SKU that has no
// state, a [Store.Rebuild]); Epoch counts the administrative writes since.
// A Fence read before a flush, a restart without persistence or a rebuild
// never matches the state after it, even if that state reaches the same
// epoch. Deducts and returns leave the Fence alone.
type Fence struct {
	Gen   string
	Epoch int64
}

// SKUState is a SKU's state hash as one read saw it.
type SKUState struct {
	SKU string
	// Exists is false for a SKU never put on sale; the other fields are
	// then zero.
	Exists bool
	stock.Levels
	// Version counts every write to the SKU (deducts and returns too).
	Version int64
	// Fence changes with every administrative write (PutOnSale, Restock,
	// Adjust, Rebuild, Relist) and every recreation of the state, and with
	// nothing else. Pass it to Adjust.
	Fence Fence
}

// inspectBatch is how many SKUs one pipelined read covers.
const inspectBatch = 512

// Inspect reads the state of every SKU, in one round trip per 512 SKUs.
// Each SKU's state is read atomically; different SKUs at slightly
// different moments.
func (s *Store) Inspect(ctx context.Context, skus []string) (_ []SKUState, err error) {
	defer named(&err, "inspect", "")
	for i, sku := range skus {
		if err := stock.ValidateID("skus["+strconv.Itoa(i)+"]", sku); err != nil {
			return nil, err
		}
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	out := make([]SKUState, 0, len(skus))
	for start := 0; start < len(skus); start += inspectBatch {
		batch := skus[start:min(start+inspectBatch, len(skus))]
		cmds := make([]*redis.SliceCmd, len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, sku := range batch {
				cmds[i] = p.HMGet(ctx, s.stateKey(sku), stateFields...)
			}
		})
		for i, c := range cmds {
			v, err := c.Result()
			if err != nil {
				return nil, s.readErr(ctx, err)
			}
			st, err := parseState(batch[i], v)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	// A SKU split into buckets: the sum over its buckets (bucketLevels).
	err = s.eachSplit(ctx, skus, func(i int, b *buckets) (err error) {
		out[i], err = s.bucketLevels(ctx, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseState decodes an HMGET of stateFields.
func parseState(sku string, v []any) (SKUState, error) {
	st := SKUState{SKU: sku}
	if len(v) != len(stateFields) {
		return st, badReply(v)
	}
	if v[0] == nil {
		return st, nil
	}
	var n [7]int64
	for i, x := range v[:7] {
		str, _ := x.(string)
		if str == "" {
			continue // fields a PutOnSale of an older layout did not write
		}
		var err error
		if n[i], err = strconv.ParseInt(str, 10, 64); err != nil {
			return st, badReply(v)
		}
	}
	st.Exists = true
	st.Levels = stock.Levels{Available: n[0], Held: n[1], Sold: n[2], PerUserLimit: n[3],
		HoldTTL: time.Duration(n[4]) * time.Millisecond}
	// A state written before max_ms existed: the maximum is the hold time.
	st.MaxHoldTTL = st.HoldTTL
	if str, _ := v[8].(string); str != "" {
		ms, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return st, badReply(v)
		}
		st.MaxHoldTTL = time.Duration(ms) * time.Millisecond
	}
	gen, _ := v[7].(string)
	st.Version, st.Fence = n[5], Fence{Gen: gen, Epoch: n[6]}
	return st, nil
}

// Adjust adds delta (which may be negative) to the SKU's available units if
// its fence is still f, that is, if no administrative write (PutOnSale,
// Restock, Adjust, Rebuild, Relist) ran and the state was not recreated (a
// flush and a rebuild) since the caller's Inspect or Snapshot; deducts and
// returns in between do not matter, since they move units without changing
// what a correction should add. It reports applied=false and changes
// nothing when the fence moved (read again and recompute). It never takes
// available units below 0 or above stock.MaxUnits: such a delta fails with
// stock.ErrInvalid. A SKU with no state fails with stock.ErrUnknownSKU.
//
// A resend of the call by the client after a lost reply reports the
// correction applied (the applying run records the call's token). After
// stock.ErrUnknownOutcome, Inspect again: an applied correction has moved
// the fence.
func (s *Store) Adjust(ctx context.Context, sku string, f Fence, delta int64) (applied bool, err error) {
	defer named(&err, "adjust SKU", sku)
	if err := stock.ValidateID("sku", sku); err != nil {
		return false, err
	}
	if delta < -stock.MaxUnits || delta > stock.MaxUnits {
		return false, &stock.InvalidError{Field: "delta", Reason: strconv.FormatInt(delta, 10) + " is out of range"}
	}
	if err := ctx.Err(); err != nil {
		return false, notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	if b, err := s.splitSKU(ctx, sku); err != nil {
		return false, err
	} else if b != nil && delta < 0 {
		ready, short, err := s.gatherFirst(ctx, b, -delta)
		if err != nil || !ready {
			if short {
				st, lerr := s.bucketLevels(ctx, b)
				if lerr != nil {
					return false, lerr
				}
				return false, rangeErr(st.Available)
			}
			return false, err // units moved: so did the fence
		}
	}
	token, err := randomToken()
	if err != nil {
		return false, err
	}
	res, err := adjustScript.Run(ctx, s.c, s.leaseKeys(sku), f.Gen, f.Epoch, delta, int64(stock.MaxUnits), token).Slice()
	if err != nil {
		return false, s.writeErr(ctx, err)
	}
	code, n := replyCode(res)
	switch code {
	case "ok":
		return true, nil
	case "stale":
		return false, nil
	case "unknown_sku":
		return false, &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	case "range":
		return false, rangeErr(n)
	}
	return false, badReply(res)
}

// rangeErr is the refusal of a correction that would take a SKU's available
// units (avail before it) outside [0, stock.MaxUnits].
func rangeErr(avail int64) error {
	return &stock.InvalidError{Field: "delta", Reason: "would take available units (" +
		strconv.FormatInt(avail, 10) + ") outside [0, " + strconv.FormatInt(stock.MaxUnits, 10) + "]"}
}

// Outcome is what a conditional administrative write did to one SKU.
type Outcome int

const (
	// Applied: the write was made.
	Applied Outcome = iota + 1
	// Exists: Rebuild found a state for the SKU and left it alone.
	Exists
	// Absent: Relist found no state for the SKU (never on sale, or lost).
	Absent
	// Moved: Relist found another Fence (an administrative write, a
	// flush or a rebuild since the read), or Rebuild found its Claim void.
	Moved
	// HasHolds: Relist without Force found units held.
	HasHolds
	// OutOfRange: Relist's Delta would take the available units outside
	// [0, stock.MaxUnits].
	OutOfRange
	// Partial: Rebuild created the missing first state of a SKU split
	// into buckets, empty, beside buckets whose states lived: the SKU is
	// on sale with their units, not the Listing's. Read it again and
	// correct it (package reconcile does, down whatever its MaxAutoFix).
	Partial
)

var outcomeNames = [...]string{"", "applied", "exists", "absent", "moved", "has-holds", "out-of-range", "partial"}

// String returns the outcome's name, e.g. "applied".
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(?)"
}

// Relist is a fenced warm-up of one SKU on sale: a correction of its
// available units together with new settings.
type Relist struct {
	SKU string
	// Fence is the SKU's fence as read (Inspect, Snapshot).
	Fence Fence
	// Delta is added to the available units.
	Delta int64
	// PerUserLimit, HoldTTL and MaxHoldTTL replace the SKU's settings, as
	// in stock.Listing (a zero MaxHoldTTL is the hold time).
	PerUserLimit int64
	HoldTTL      time.Duration
	MaxHoldTTL   time.Duration
	// Force applies the write even while units are held; without it, a SKU
	// with live holds at the instant of the write is left alone (HasHolds).
	Force bool
}

// Relist applies each warm-up atomically and on its own, only if the SKU's
// fence is still rl.Fence (otherwise Moved: read again) and, unless Force,
// no units are held at that instant, in one round trip per 1024 SKUs. The
// outcomes are in input order. On stock.ErrUnknownOutcome, read again:
// an applied Relist moved the fence.
func (s *Store) Relist(ctx context.Context, rls []Relist) (_ []Outcome, err error) {
	defer named(&err, "relist", "")
	for i, rl := range rls {
		l := stock.Listing{SKU: rl.SKU, PerUserLimit: rl.PerUserLimit, HoldTTL: rl.HoldTTL, MaxHoldTTL: rl.MaxHoldTTL}
		if err := l.Validate(); err != nil {
			return nil, err
		}
		if rl.Delta < -stock.MaxUnits || rl.Delta > stock.MaxUnits {
			return nil, &stock.InvalidError{Field: "relists[" + strconv.Itoa(i) + "].Delta", Reason: "out of range"}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	skus := skusOf(rls, func(rl Relist) string { return rl.SKU })
	bs, err := s.splitAll(ctx, skus)
	if err != nil || bs == nil {
		if err != nil {
			return nil, err
		}
		return s.relistStates(ctx, rls)
	}
	out := make([]Outcome, len(rls))
	var plain []Relist
	var at []int
	for i, rl := range rls {
		if bs[i] == nil {
			plain, at = append(plain, rl), append(at, i)
			continue
		}
		if out[i], err = s.relistBucketed(ctx, bs[i], rl); err != nil {
			return nil, err
		}
	}
	got, err := s.relistStates(ctx, plain)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		out[i] = got[k]
	}
	return out, nil
}

// relistStates is Relist of valid requests, each on one gate state.
func (s *Store) relistStates(ctx context.Context, rls []Relist) ([]Outcome, error) {
	out := make([]Outcome, 0, len(rls))
	for start := 0; start < len(rls); start += snapshotBatch {
		batch := rls[start:min(start+snapshotBatch, len(rls))]
		cmds := make([]*redis.Cmd, len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, rl := range batch {
				force := "0"
				if rl.Force {
					force = "1"
				}
				l := stock.Listing{HoldTTL: rl.HoldTTL, MaxHoldTTL: rl.MaxHoldTTL}
				cmds[i] = relistScript.Run(ctx, p, s.leaseKeys(rl.SKU), rl.Fence.Gen, rl.Fence.Epoch,
					rl.Delta, rl.PerUserLimit, l.EffectiveHoldTTL().Milliseconds(), int64(stock.MaxUnits), force,
					l.EffectiveMaxHoldTTL().Milliseconds())
			}
		})
		for _, c := range cmds {
			res, err := c.Slice()
			if err != nil {
				return out, s.batchErr(ctx, err, start, len(batch))
			}
			code, _ := replyCode(res)
			o, ok := relistOutcomes[code]
			if !ok {
				return out, badReply(res)
			}
			out = append(out, o)
		}
	}
	return out, nil
}

var relistOutcomes = map[string]Outcome{"ok": Applied, "absent": Absent, "stale": Moved, "held": HasHolds, "range": OutOfRange}
