package redisstock

import (
	"cmp"
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
)

// slotBatchers coalesces, on a Redis Cluster, the binds of concurrent
// Deducts (one batcher, whatever their slots) and the takes of orders
// whose SKUs share one hash slot: one batcher per slot, made when the slot
// is first used (at most one per slot of the cluster).
type slotBatchers struct {
	max   int
	binds *batcher
	m     sync.Map // slot -> *batcher
}

// slotBatcher returns the batcher of the attempt's slot, or nil when its
// order is not batched (several slot groups, or no slot batching).
func (s *Store) slotBatcher(a *attempt) *batcher {
	if s.slots == nil || len(a.groups) != 1 || a.ended {
		return nil
	}
	slot := keyslot.Slot(a.groups[0][0].SKU)
	if b, ok := s.slots.m.Load(slot); ok {
		return b.(*batcher)
	}
	b, _ := s.slots.m.LoadOrStore(slot, &batcher{s: s, max: s.slots.max, run: s.deductSlotBatch})
	return b.(*batcher)
}

// bindBatch binds the order IDs of the attempts of calls (bindNew, then
// bindExisting), gives each call its bind's reply, which the caller reads
// as an unbatched attempt reads bindOne's, and returns the first failure;
// then it queues the takes (queueTakes).
func (s *Store) bindBatch(ctx context.Context, calls []*call) error {
	defer s.queueTakes(calls)
	created := make([]*redis.BoolCmd, len(calls))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, c := range calls {
			created[i] = s.bindNew(ctx, p, c.a)
		}
	})
	return s.bindExisting(ctx, calls, created)
}

// queueTakes queues, in one step per slot, the takes of the calls whose
// bind said "new" or "same" and whose order is batched, and names each in
// its call's take, under the binds' lock, so that the caller waits for it
// (see batcher.wait); a caller that has left, or whose context has ended,
// is left to queue its own take, which it then leaves unsent.
func (s *Store) queueTakes(calls []*call) {
	var bySlot map[*batcher][]*call
	binds := s.slots.binds
	binds.mu.Lock()
	for _, c := range calls {
		if w, _ := bindReply(c.bind); (w != "new" && w != "same") || c.left || c.ctx.Err() != nil {
			continue
		}
		b := s.slotBatcher(c.a)
		if b == nil {
			continue
		}
		if bySlot == nil {
			bySlot = make(map[*batcher][]*call)
		}
		c.take = &call{ctx: c.ctx, a: c.a, at: c.at} // waited since it queued for its bind
		bySlot[b] = append(bySlot[b], c.take)
	}
	binds.mu.Unlock()
	for b, takes := range bySlot {
		b.enqueue(takes)
	}
}

// deductSlotBatch takes the first slot group of the attempts of calls, all
// of one slot, whose IDs are bound, in one deduct script call (the hot one
// for a batch of the flash sale's shape, and stock_deduct.lua for the
// orders it leaves), gives each call its part of the replies, which the
// caller reads as an unbatched attempt reads its own, and returns the
// deduct script call's failure, if it failed.
func (s *Store) deductSlotBatch(ctx context.Context, calls []*call) error {
	hot := hotSlotBatch(calls)
	var multi *redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		if hot {
			multi = s.deductHotSlot(ctx, p, calls)
		} else {
			multi = s.deductGroups(ctx, p, calls)
		}
	})
	var left []*call // the orders the hot script left
	for i, c := range calls {
		c.first = partReply(multi, i)
		if v, ok := c.first.Val().(int64); hot && ok && v == notHere {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		more := s.deductGroups(ctx, s.c, left)
		for i, c := range left {
			c.first = partReply(more, i)
		}
	}
	return s.writeErr(ctx, multi.Err())
}

// bindExisting sets each call's bind reply from its bindNew (created):
// "new" where HSETNX created the entry, its failure where it failed, and
// where the entry exists the reply of stock_dir_bind.lua, run for those
// IDs in one pipeline, one call per directory shard. It returns the first
// failure.
func (s *Store) bindExisting(ctx context.Context, calls []*call, created []*redis.BoolCmd) error {
	type shard struct {
		cmd   *redis.Cmd
		calls []int // indexes into calls, in the calls' order
	}
	dir := s.dir.Load()
	var shards map[int]*shard
	var first error
	for i, c := range calls {
		switch err := created[i].Err(); {
		case err != nil:
			c.bind = redis.NewCmdResult(nil, err)
			first = cmp.Or(first, err)
		case created[i].Val():
			c.bind = redis.NewCmdResult("new", nil)
		default:
			if shards == nil {
				shards = make(map[int]*shard)
			}
			k := dir.shard(c.a.o.ID)
			if shards[k] == nil {
				shards[k] = &shard{}
			}
			shards[k].calls = append(shards[k].calls, i)
		}
	}
	if len(shards) == 0 {
		return first
	}
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k, sh := range shards {
			args := make([]any, 0, 3*len(sh.calls))
			for _, i := range sh.calls {
				a := calls[i].a
				args = append(args, a.o.ID, a.ident, a.token)
			}
			sh.cmd = dirBindScript.Run(ctx, p, []string{dir.keys[k]}, args...)
		}
	})
	for _, sh := range shards {
		for j, i := range sh.calls {
			calls[i].bind = partReply(sh.cmd, j)
		}
		first = cmp.Or(first, sh.cmd.Err())
	}
	return first
}

// deductGroups queues or runs one stock_deduct.lua call taking the first
// slot group of each call's attempt.
func (s *Store) deductGroups(ctx context.Context, c redis.Scripter, calls []*call) *redis.Cmd {
	var keys []string
	var args []any
	for _, c := range calls {
		keys, args = s.groupArgs(keys, args, c.a, c.a.groups[0], 0, 0)
	}
	return deductScript.Run(ctx, c, keys, args...)
}

// hotSlotBatch reports whether calls have the shape stock_deduct_hot.lua
// takes on a slot: orders of the same SKUs (a line of each), whose
// attempts read the same generations of their states, with distinct order
// IDs.
func hotSlotBatch(calls []*call) bool {
	a0 := calls[0].a
	g := a0.groups[0]
	for _, c := range calls {
		if len(c.a.groups) != 1 || len(c.a.groups[0]) != len(g) {
			return false
		}
		for i, it := range c.a.groups[0] {
			if it.SKU != g[i].SKU || c.a.gens[it.SKU] != a0.gens[it.SKU] {
				return false
			}
		}
	}
	return distinctIDs(calls, func(c *call) string { return c.a.o.ID })
}

// deductHotSlot queues stock_deduct_hot.lua (mode 'slot') taking calls
// (see hotSlotBatch).
func (s *Store) deductHotSlot(ctx context.Context, p redis.Pipeliner, calls []*call) *redis.Cmd {
	g := calls[0].a.groups[0]
	keys := make([]string, 0, 4*len(g))
	for _, it := range g {
		keys = s.dealKeys(keys, it.SKU)
	}
	gens := make([]string, len(g))
	for j, it := range g {
		gens[j] = calls[0].a.gens[it.SKU]
	}
	args := make([]any, 0, 3+(6+len(g))*len(calls))
	args = append(args, strings.Join(gens, " "), "slot", len(g))
	for _, c := range calls {
		a := c.a
		args = append(args, a.o.ID, a.o.UserID, a.ident, a.own, a.token, a.now)
		for _, it := range a.groups[0] {
			args = append(args, it.Qty)
		}
	}
	return hotScript.Run(ctx, p, keys, args...)
}
