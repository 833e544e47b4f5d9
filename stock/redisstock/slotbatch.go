package redisstock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
)

// slotBatchers coalesces, on a Redis Cluster, the concurrent Deducts of
// orders whose SKUs share one hash slot: one batcher per slot, made when
// the slot is first used (at most one per slot of the cluster).
type slotBatchers struct {
	max int
	m   sync.Map // slot -> *batcher
}

// slotBatcher returns the batcher of the attempt's slot, or nil when its
// order is not batched (several slot groups, or no slot batching).
func (s *Store) slotBatcher(a *attempt) *batcher {
	if s.slots == nil || len(a.groups) != 1 {
		return nil
	}
	slot := keyslot.Slot(a.groups[0][0].SKU)
	if b, ok := s.slots.m.Load(slot); ok {
		return b.(*batcher)
	}
	b, _ := s.slots.m.LoadOrStore(slot, &batcher{s: s, max: s.slots.max, run: s.deductSlotBatch})
	return b.(*batcher)
}

// deductSlotBatch sends the first round trip of the attempts of calls,
// orders of one slot group each, all in one slot: one pipeline with one
// bind script call per directory shard the orders' IDs fall in (each on
// its shard's master, binding that shard's orders) and one deduct script
// call taking every order in turn. It gives each call its two replies,
// which the caller reads as an unbatched attempt reads them, and returns
// the deduct script call's failure, if it failed.
func (s *Store) deductSlotBatch(ctx context.Context, calls []*call) error {
	type shard struct {
		cmd   *redis.Cmd
		calls []int // indexes into calls, in the call's order
	}
	dir := s.dir.Load()
	shards := make([]shard, len(dir.keys))
	at := make([]int, len(calls)) // each call's part of its shard's reply
	for i, c := range calls {
		sh := &shards[dir.shard(c.a.o.ID)]
		at[i] = len(sh.calls)
		sh.calls = append(sh.calls, i)
	}
	var multi *redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k := range shards {
			sh := &shards[k]
			if len(sh.calls) == 0 {
				continue
			}
			args := make([]any, 0, 1+3*len(sh.calls))
			args = append(args, calls[sh.calls[0]].a.now)
			for _, i := range sh.calls {
				a := calls[i].a
				args = append(args, a.o.ID, a.ident, a.token)
			}
			sh.cmd = dirBindScript.Run(ctx, p, []string{dir.keys[k]}, args...)
		}
		var keys []string
		var args []any
		for _, c := range calls {
			keys, args = s.groupArgs(keys, args, c.a, c.a.groups[0], 0, 0)
		}
		multi = deductScript.Run(ctx, p, keys, args...)
	})
	for i, c := range calls {
		c.bind, c.first = partReply(shards[dir.shard(c.a.o.ID)].cmd, at[i], "deduct"), partReply(multi, i, "deduct")
		close(c.done)
	}
	if err := multi.Err(); err != nil {
		return s.writeErr(ctx, "deduct", err)
	}
	return nil
}
