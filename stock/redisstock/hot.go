package redisstock

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// hotSource is stock_deduct_hot.lua (hotScript), which deductHot sends
// itself, as deductBatch sends stock_deduct_batch.lua.
var (
	hotSource = lua.Script("stock_deduct_hot.lua")
	hotScript = redis.NewScript(hotSource)
)

// oneSource is stock_deduct_one.lua (oneScript): stock_deduct_hot.lua's
// work for a batch of one order, with less Lua.
var (
	oneSource = lua.Script("stock_deduct_one.lua")
	oneScript = redis.NewScript(oneSource)
)

func init() { allScripts = append(allScripts, hotScript, oneScript) }

// notHere is stock_deduct_hot.lua's answer for an order it leaves to
// stock_deduct_batch.lua.
const notHere = 15

// hotBatch reports whether calls have the flash sale's shape that
// stock_deduct_hot.lua takes: orders of the same SKUs (a line of each),
// with distinct order IDs, on a directory of one shard (one server).
func (s *Store) hotBatch(calls []*call) bool {
	if len(s.dir.Load().keys) != 1 {
		return false
	}
	first := calls[0].o.keys[1:]
	for _, c := range calls[1:] {
		if !slices.Equal(c.o.keys[1:], first) {
			return false
		}
	}
	return distinctIDs(calls, func(c *call) string { return c.o.id })
}

// distinctIDs reports whether no two calls carry the same order ID (id).
func distinctIDs(calls []*call, id func(c *call) string) bool {
	if len(calls) <= 8 {
		for i, c := range calls {
			for _, d := range calls[:i] {
				if id(c) == id(d) {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(calls))
	for _, c := range calls {
		if _, dup := seen[id(c)]; dup {
			return false
		}
		seen[id(c)] = struct{}{}
	}
	return true
}

// deductHot runs calls (see hotBatch) in one stock_deduct_hot.lua call and
// sets the outcome of each order the script decided; it returns the calls it left to stock_deduct_batch.lua
// (repeats, conflicts, a SKU not on sale). A failed call gives every order
// the same classified error, which it returns.
// A batch of one order goes through stock_deduct_one.lua, which does the
// same with less Lua.
func (s *Store) deductHot(ctx context.Context, calls []*call) ([]*call, error) {
	if len(calls) == 1 {
		return s.runHot(ctx, calls, oneScript, oneSource)
	}
	return s.runHot(ctx, calls, hotScript, hotSource)
}

// runHot runs calls in one call of script (stock_deduct_hot.lua, or
// stock_deduct_one.lua for one order), whose text is source, as deductHot
// says.
func (s *Store) runHot(ctx context.Context, calls []*call, script *redis.Script, source string) ([]*call, error) {
	o := &calls[0].o
	lines := len(o.items)
	args := make([]any, 0, 7+len(o.refs)+lines+(4+lines)*len(calls))
	args = append(args, "evalsha", script.Hash(), o.nkeys+lines)
	args = append(args, o.refs[1:o.nkeys]...) // the SKUs' keys, the directory's, the SKUs' hold queues
	args = append(args, o.refs[0])
	for _, it := range o.items {
		args = append(args, s.queueKey(it.SKU))
	}
	args = append(args, s.nowMs(), "one", lines)
	for _, c := range calls {
		r := c.o.refs[c.o.nkeys:] // ID, user, identity, own hold, lines, units...
		args = append(args, r[0], r[1], r[2], r[3])
		args = append(args, r[5:]...)
	}
	res, err := s.c.Do(ctx, args...).Slice()
	if err != nil && isNoScript(err) {
		args[0], args[1] = "eval", source
		res, err = s.c.Do(ctx, args...).Slice()
	}
	var slow []*call
	for i, c := range calls {
		switch {
		case err != nil:
			c.err = s.writeErr(c.ctx, err)
		case len(res) != len(calls):
			c.err = badReply(res)
		default:
			if v, ok := res[i].(int64); ok && v == notHere {
				slow = append(slow, c)
				continue
			}
			c.err = orderResult(&c.o, res[i])
		}
	}
	if err != nil {
		return nil, s.writeErr(ctx, err)
	}
	return slow, nil
}
