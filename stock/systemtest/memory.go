package systemtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CheckMemory is the at-rest check of what the gate stores: after every
// order ended and Retention passed, with a reclaim pass after it, the
// gate's footprint (Config.Footprint) has no key it did not have before
// the first order, and no key larger than it was then.
const CheckMemory = "memory"

// readBaseline reads the gate's footprint before the first order.
func (r *runner) readBaseline() error {
	if r.cfg.Footprint == nil {
		return nil
	}
	fp, err := r.cfg.Footprint(r.ctx)
	if err != nil {
		return fmt.Errorf("systemtest: the gate's footprint before the sale: %w", err)
	}
	r.baseline = fp
	return nil
}

// checkMemory moves the clock past Retention, drains the reclaimer and
// compares the gate's footprint with the baseline.
func (r *runner) checkMemory(next func(string)) {
	if r.cfg.Footprint == nil {
		return
	}
	next(fmt.Sprintf("tick +%v (Retention)", r.cfg.Retention))
	r.cfg.Clock.Advance(r.cfg.Retention)
	r.trace(r.line)
	if !r.settle("reclaim", next) {
		return
	}
	next("memory check")
	fp, err := r.cfg.Footprint(r.ctx)
	if err != nil {
		r.violate(CheckNotQuiescent, "the gate's footprint at rest: %v", err)
		r.trace(r.line)
		return
	}
	for _, d := range grown(r.baseline, fp) {
		r.violate(CheckMemory, "past Retention, at rest: %s", d)
	}
	r.line += fmt.Sprintf(" %d keys, %d before the sale", len(fp), len(r.baseline))
	r.trace(r.line)
}

// grown lists, in key order, the keys of now that base did not have and
// those larger in now than in base.
func grown(base, now map[string]int64) []string {
	keys := make([]string, 0, len(now))
	for k := range now {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		was, ok := base[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("key %s (size %d) was not stored before the sale", k, now[k]))
		case now[k] > was:
			out = append(out, fmt.Sprintf("key %s has size %d, %d before the sale", k, now[k], was))
		}
	}
	return out
}

// RedisFootprint is a Config.Footprint for a Redis gate: every key of c
// (each master of a Cluster, each shard of a Ring) whose name begins with
// prefix and a colon, with its size: the number of fields, members or
// elements of a hash, set, sorted set or list, 1 for a string (whose
// length a counter's value changes) and for any other type. The sizes are
// what per-order data adds to; unlike MEMORY USAGE they do not depend on
// the server's encodings or allocator, so a run compares them exactly.
//
// Keys whose name ends with one of sale are left out: the sale's own data,
// bounded by its SKUs and buyers whatever the number of orders, which a
// sale may add to and keep (for redisstock: a SKU's state hash, whose
// bookkeeping fields are written when first needed; the per-user units
// held and bought, which the per-user limit counts for the whole sale; the
// SKU registry and the bucket map). It reads whole keyspaces, for tests,
// not for a Redis serving a sale.
func RedisFootprint(c redis.UniversalClient, prefix string, sale ...string) func(ctx context.Context) (map[string]int64, error) {
	return func(ctx context.Context) (map[string]int64, error) {
		var mu sync.Mutex
		out := map[string]int64{}
		read := func(ctx context.Context, n redis.UniversalClient) error {
			fp, err := nodeFootprint(ctx, n, prefix)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range fp {
				if !slices.ContainsFunc(sale, func(s string) bool { return strings.HasSuffix(k, s) }) {
					out[k] = v
				}
			}
			return err
		}
		each := func(ctx context.Context, n *redis.Client) error { return read(ctx, n) }
		var err error
		switch c := c.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, each)
		case *redis.Ring:
			err = c.ForEachShard(ctx, each)
		default: // one server
			err = read(ctx, c)
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// nodeFootprint is RedisFootprint on one server.
func nodeFootprint(ctx context.Context, n redis.UniversalClient, prefix string) (map[string]int64, error) {
	var keys []string
	iter := n.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	types := make([]*redis.StatusCmd, len(keys))
	if _, err := n.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			types[i] = p.Type(ctx, k)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	sizes := make([]*redis.IntCmd, len(keys))
	if _, err := n.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			switch strings.ToLower(types[i].Val()) {
			case "hash":
				sizes[i] = p.HLen(ctx, k)
			case "set":
				sizes[i] = p.SCard(ctx, k)
			case "zset":
				sizes[i] = p.ZCard(ctx, k)
			case "list":
				sizes[i] = p.LLen(ctx, k)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(keys))
	for i, k := range keys {
		switch {
		case types[i].Val() == "none":
			// Gone between the scan and the read.
		case sizes[i] == nil:
			out[k] = 1
		default:
			out[k] = sizes[i].Val()
		}
	}
	return out, nil
}
