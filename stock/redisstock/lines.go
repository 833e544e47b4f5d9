package redisstock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// lineState is one line record as the checks of Confirm, RevertItems and
// ExtendHold on several Cluster slots read it.
type lineState struct {
	sku          string
	group        int
	st, id, done string // done: the return's signature, if applied to the line
	qty, ret, dl int64
	mx           int64 // the order's bound
	live         bool  // the SKU's state exists
}

// of reports whether the line has a record of the order of identity ident.
func (l lineState) of(ident string) bool { return l.st != "" && l.id == ident }

// readLines reads every line record of an order on several slots, and
// whether each SKU's state exists, in one round trip; done is the
// signature of the return op where it was applied to a line ("" for no
// op).
func (s *Store) readLines(ctx context.Context, order string, groups [][]stock.Item, ret string) ([]lineState, error) {
	type cmds struct {
		rec  *redis.StringCmd
		live *redis.BoolCmd
	}
	var cs []cmds
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, g := range groups {
			for _, it := range g {
				cs = append(cs, cmds{p.HGet(ctx, s.linesKey(it.SKU), order), p.HExists(ctx, s.stateKey(it.SKU), "hold")})
			}
		}
		at = p.Time(ctx)
	})
	now, err := serverMs(at) // records' ends are the server's time
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	out := make([]lineState, 0, len(cs))
	k := 0
	for gi, g := range groups {
		for _, it := range g {
			c := cs[k]
			k++
			if err := firstErr(c.rec, c.live); err != nil {
				return nil, s.readErr(ctx, err)
			}
			v := c.rec.Val()
			r, ok, err := parseRecord(v, now)
			if err != nil {
				return nil, badReply(v)
			}
			l := lineState{sku: it.SKU, group: gi, live: c.live.Val()}
			if ok {
				l.st, l.id, l.qty, l.ret, l.dl, l.mx = r.st, r.ident, r.qty, r.ret, r.dl, r.mx
				if ret != "" {
					l.done = r.ops[ret]
				}
			}
			out = append(out, l)
		}
	}
	return out, nil
}
