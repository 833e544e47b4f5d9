package redisstock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// Audit reads every per-order item under the Store's prefix (directory
// entries, line records, holds, hold queue entries, gone lists, open
// zsets) and returns what is neither ended nor live for a reason the
// layout names (see "The life of an order" in the package doc), one
// finding per item, and how many per-order items are stored. A live
// entry's reasons: a held line of its order, or its member in its shard's
// open zset (the reclaimer settles it then); a held line's: its order's
// live entry and its hold in the SKU's holds zset or hold queue; a hold's
// in the zset: a held line. A queue entry is no finding (the reclaimer
// takes an ended hold's off the queue once the holds before it have), only
// counted. Once every order has ended and
// Retention and the attempt lease have passed, with reclaim passes after
// them, stored is 0: the prefix holds its SKUs' states and nothing per
// order. It reads whole keys, for tests and checks at rest, not for a
// Redis serving a sale.
func (s *Store) Audit(ctx context.Context) (orphans []string, stored int, err error) {
	defer named(&err, "audit", "")
	if err := s.ready(ctx); err != nil {
		return nil, 0, err
	}
	skus, err := s.c.SMembers(ctx, s.registryKey()).Result()
	if err != nil {
		return nil, 0, s.readErr(ctx, err)
	}
	skus = slices.DeleteFunc(skus, isMark)
	dir := s.dir.Load()
	var entries, lines []*redis.MapStringStringCmd
	var opens, holds []*redis.ZSliceCmd
	var queues []*redis.StringSliceCmd
	var gones []*redis.IntCmd
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k := range dir.keys {
			entries = append(entries, p.HGetAll(ctx, dir.keys[k]))
			opens = append(opens, p.ZRangeWithScores(ctx, dir.opens[k], 0, -1))
			gones = append(gones, p.LLen(ctx, dir.gones[k]))
		}
		for _, sku := range skus {
			lines = append(lines, p.HGetAll(ctx, s.linesKey(sku)))
			holds = append(holds, p.ZRangeWithScores(ctx, s.holdsKey(sku), 0, -1))
			queues = append(queues, p.LRange(ctx, s.queueKey(sku), 0, -1))
			gones = append(gones, p.LLen(ctx, s.goneKey(sku)))
		}
		at = p.Time(ctx)
	})
	now, err := serverMs(at)
	if err != nil {
		return nil, 0, s.readErr(ctx, err)
	}
	live := map[string]string{} // order ID -> identity of its live entry
	open := map[string]bool{}
	for k := range dir.keys {
		zs, err := opens[k].Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		for _, z := range zs {
			open[z.Member.(string)] = true
		}
		all, err := entries[k].Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		stored += len(zs) + len(all)
		for id, v := range all {
			if d, ok, err := parseEntry(v, now); err != nil || ok && d.e == 0 {
				live[id] = d.ident
			}
		}
	}
	held := map[string]bool{} // order ID + "\n" + SKU of each held line
	for i, sku := range skus {
		all, err := lines[i].Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		zs, err := holds[i].Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		qs, err := queues[i].Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		stored += len(all) + len(zs) + len(qs)
		inZset, inQueue := map[string]bool{}, map[string]bool{}
		for _, z := range zs {
			inZset[z.Member.(string)] = true
		}
		for _, e := range qs {
			_, id, _ := strings.Cut(e, " ")
			inQueue[id] = true
		}
		for id, v := range all {
			r, ok, err := parseRecord(v, now)
			switch {
			case err != nil:
				orphans = append(orphans, fmt.Sprintf("line %s of order %s: %v", strconv.Quote(sku), strconv.Quote(id), err))
			case !ok || r.st != "held":
			case live[id] != r.ident:
				orphans = append(orphans, fmt.Sprintf("held line %s of order %s without its order's live entry", strconv.Quote(sku), strconv.Quote(id)))
			case !inZset[id] && !inQueue[id]:
				orphans = append(orphans, fmt.Sprintf("held line %s of order %s not in the SKU's holds", strconv.Quote(sku), strconv.Quote(id)))
			default:
				held[id+"\n"+sku] = true
			}
		}
		for id := range inZset {
			if r, ok, _ := parseRecord(all[id], now); !ok || r.st != "held" {
				orphans = append(orphans, fmt.Sprintf("hold of order %s on %s without a held line", strconv.Quote(id), strconv.Quote(sku)))
			}
		}
	}
	for id, ident := range live {
		items, err := parseIdent(ident)
		if err != nil {
			orphans = append(orphans, fmt.Sprintf("entry of order %s: %v", strconv.Quote(id), err))
			continue
		}
		holds := slices.ContainsFunc(items, func(it stock.Item) bool { return held[id+"\n"+it.SKU] })
		if !holds && !open[id] {
			orphans = append(orphans, fmt.Sprintf("live entry of order %s that holds nothing and no check will settle", strconv.Quote(id)))
		}
	}
	for _, g := range gones {
		n, err := g.Result()
		if err != nil {
			return nil, 0, s.readErr(ctx, err)
		}
		stored += int(n)
	}
	slices.Sort(orphans)
	return orphans, stored, nil
}
