package redisstock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// rebuildHolds reads, in one round trip, the order IDs in the holds zset
// of each SKU of a Rebuild batch (done SKUs of the call came before it).
// No hold is added to a SKU without a state, so the IDs read are all the
// rebuild script has to count: it counts those still held when it runs.
func (s *Store) rebuildHolds(ctx context.Context, batch []Rebuild, done int) ([][]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(batch))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, r := range batch {
			cmds[i] = p.ZRange(ctx, s.holdsKey(r.Listing.SKU), 0, -1)
		}
	})
	out := make([][]string, len(batch))
	for i, c := range cmds {
		ids, err := c.Result()
		if err != nil {
			if done > 0 {
				return nil, &outcomeError{op: "rebuild", err: err}
			}
			return nil, s.readErr(ctx, "rebuild", err)
		}
		out[i] = ids
	}
	return out, nil
}
