package redisstock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// hotSource is stock_deduct_hot.lua (hotScript), which deductHot sends
// itself, as deductBatch sends stock_deduct_batch.lua.
var (
	hotSource = lua.Script("stock_deduct_hot.lua")
	hotScript = redis.NewScript(hotSource)
)

func init() { allScripts = append(allScripts, hotScript) }

// notHere is stock_deduct_hot.lua's answer for an order it leaves to
// stock_deduct_batch.lua.
const notHere = 15

// hotBatch reports whether calls have the flash sale's shape that
// stock_deduct_hot.lua takes: single-line orders of one SKU, with distinct
// order IDs, on a directory of one shard (one server).
func (s *Store) hotBatch(calls []*call) bool {
	if len(s.dir.Load().keys) != 1 {
		return false
	}
	state := calls[0].o.keys[1]
	for _, c := range calls {
		if c.o.n != 1 || c.o.keys[1] != state {
			return false
		}
	}
	return distinctIDs(calls)
}

// distinctIDs reports whether no two calls carry the same order ID.
func distinctIDs(calls []*call) bool {
	if len(calls) <= 8 {
		for i, c := range calls {
			for _, d := range calls[:i] {
				if c.o.id == d.o.id {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(calls))
	for _, c := range calls {
		if _, dup := seen[c.o.id]; dup {
			return false
		}
		seen[c.o.id] = struct{}{}
	}
	return true
}

// deductHot runs calls (see hotBatch) in one stock_deduct_hot.lua call and
// sets the outcome of each order the script decided (closing its done
// channel, if any); it returns the calls it left to stock_deduct_batch.lua
// (repeats, conflicts, a SKU not on sale). A failed call gives every order
// the same classified error, which it returns.
func (s *Store) deductHot(ctx context.Context, calls []*call) ([]*call, error) {
	k := calls[0].o
	args := make([]any, 0, 10+5*len(calls))
	args = append(args, "evalsha", hotScript.Hash(), 5, &k.keys[1], &k.keys[2], &k.keys[3], &k.keys[4], &k.keys[0], s.nowMs(), "one")
	for _, c := range calls {
		r := c.o.refs[c.o.nkeys:]
		args = append(args, r[0], r[1], r[2], r[3], r[5]) // ID, user, identity, own hold, units
	}
	res, err := s.c.Do(ctx, args...).Slice()
	if err != nil && isNoScript(err) {
		args[0], args[1] = "eval", hotSource
		res, err = s.c.Do(ctx, args...).Slice()
	}
	var slow []*call
	for i, c := range calls {
		switch {
		case err != nil:
			c.err = s.writeErr(c.ctx, "deduct", err)
		case len(res) != len(calls):
			c.err = badReply("deduct", res)
		default:
			if v, ok := res[i].(int64); ok && v == notHere {
				slow = append(slow, c)
				continue
			}
			c.err = orderResult(&c.o, res[i])
		}
		if c.done != nil {
			close(c.done)
		}
	}
	if err != nil {
		return nil, s.writeErr(ctx, "deduct", err)
	}
	return slow, nil
}
