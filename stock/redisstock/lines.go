package redisstock

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// lineState is one line record as the checks of RevertItems and ExtendHold on several
// Cluster slots read it.
type lineState struct {
	sku          string
	group        int
	st, id, done string // done: the return's signature, if applied to the line
	qty, ret, dl int64
	mx           int64 // the order's bound (dl for a record without mx)
	live         bool  // the SKU's state exists
}

// readLines reads every line record of an order on several slots, and
// whether each SKU's state exists, in one round trip.
func (s *Store) readLines(ctx context.Context, op, order string, groups [][]stock.Item, field string) ([]lineState, error) {
	type cmds struct {
		rec  *redis.SliceCmd
		live *redis.BoolCmd
	}
	var cs []cmds
	s.pipelined(ctx, func(p redis.Pipeliner) {
		cs = cs[:0]
		for _, g := range groups {
			for _, it := range g {
				cs = append(cs, cmds{p.HMGet(ctx, s.recordKey(it.SKU, order), "st", "id", field, "qty", "ret", "dl", "mx"),
					p.HExists(ctx, s.stateKey(it.SKU), "hold_ms")})
			}
		}
	})
	out := make([]lineState, 0, len(cs))
	k := 0
	for gi, g := range groups {
		for _, it := range g {
			c := cs[k]
			k++
			v, err := c.rec.Result()
			if err == nil {
				err = c.live.Err()
			}
			if err != nil {
				return nil, s.readErr(ctx, op, err)
			}
			l := lineState{sku: it.SKU, group: gi, live: c.live.Val()}
			l.st, _ = v[0].(string)
			l.id, _ = v[1].(string)
			l.done, _ = v[2].(string)
			var n [4]int64
			for i, x := range v[3:] {
				if str, _ := x.(string); str != "" {
					if n[i], err = strconv.ParseInt(str, 10, 64); err != nil {
						return nil, badReply(op, v)
					}
				}
			}
			l.qty, l.ret, l.dl, l.mx = n[0], n[1], n[2], n[3]
			if v[6] == nil {
				l.mx = l.dl // a record written before mx: no extension
			}
			out = append(out, l)
		}
	}
	return out, nil
}
