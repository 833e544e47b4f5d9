package redisstock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// stateFields are read from a SKU's state hash, in parseState's order.
var stateFields = []string{"avail", "held", "sold", "limit", "hold_ms", "ver", "epoch"}

// SKUState is a SKU's state hash as one read saw it.
type SKUState struct {
	SKU string
	// Exists is false for a SKU never put on sale; the other fields are
	// then zero.
	Exists bool
	stock.Levels
	// Version counts every write to the SKU (deducts and returns too).
	Version int64
	// Epoch counts the administrative writes only: PutOnSale, Restock and
	// Adjust. Pass it to Adjust.
	Epoch int64
}

// inspectBatch is how many SKUs one pipelined read covers.
const inspectBatch = 512

// Inspect reads the state of every SKU, in one round trip per 512 SKUs.
// Each SKU's state is read atomically; different SKUs at slightly
// different moments.
func (s *Store) Inspect(ctx context.Context, skus []string) ([]SKUState, error) {
	for i, sku := range skus {
		if err := stock.ValidateID("skus["+strconv.Itoa(i)+"]", sku); err != nil {
			return nil, err
		}
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
				return nil, s.readErr(ctx, "inspect", err)
			}
			st, err := parseState(batch[i], v)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// parseState decodes an HMGET of stateFields.
func parseState(sku string, v []any) (SKUState, error) {
	st := SKUState{SKU: sku}
	if len(v) != len(stateFields) {
		return st, badReply("state", v)
	}
	if v[0] == nil {
		return st, nil
	}
	var n [7]int64
	for i, x := range v {
		str, _ := x.(string)
		if str == "" {
			continue // fields a PutOnSale of an older layout did not write
		}
		var err error
		if n[i], err = strconv.ParseInt(str, 10, 64); err != nil {
			return st, badReply("state", v)
		}
	}
	st.Exists = true
	st.Levels = stock.Levels{Available: n[0], Held: n[1], Sold: n[2], PerUserLimit: n[3],
		HoldTTL: time.Duration(n[4]) * time.Millisecond}
	st.Version, st.Epoch = n[5], n[6]
	return st, nil
}

// Adjust adds delta (which may be negative) to the SKU's available units if
// its epoch still equals epoch, that is, if no PutOnSale, Restock or Adjust
// ran since the caller's Inspect; deducts and returns in between do not
// matter, since they move units without changing what a correction should
// add. It reports applied=false and changes nothing when the epoch moved
// (read again and recompute). It never takes available units below 0 or
// above stock.MaxUnits: such a delta fails with stock.ErrInvalid.
//
// After stock.ErrUnknownOutcome, Inspect again: an applied correction has
// moved the epoch.
func (s *Store) Adjust(ctx context.Context, sku string, epoch, delta int64) (applied bool, err error) {
	if err := stock.ValidateID("sku", sku); err != nil {
		return false, err
	}
	if delta < -stock.MaxUnits || delta > stock.MaxUnits {
		return false, &stock.InvalidError{Field: "delta", Reason: strconv.FormatInt(delta, 10) + " is out of range"}
	}
	res, err := adjustScript.Run(ctx, s.c, []string{s.stateKey(sku)}, epoch, delta, int64(stock.MaxUnits)).Slice()
	if err != nil {
		return false, s.writeErr(ctx, "adjust", err)
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
		return false, &stock.InvalidError{Field: "delta", Reason: "would take available units (" +
			strconv.FormatInt(n, 10) + ") outside [0, " + strconv.FormatInt(stock.MaxUnits, 10) + "]"}
	}
	return false, badReply("adjust", res)
}
