package redisstock

import (
	"slices"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
)

// groups splits sorted items into the groups one script can take: all of
// them on a single server, one group per hash slot (in slot order, so every
// caller takes slots in the same order) on a cluster, one group per SKU (in
// SKU order) on a client that shards some other way, such as a Ring.
func (s *Store) groups(items []stock.Item) [][]stock.Item {
	if !s.cluster || len(items) == 1 {
		return [][]stock.Item{items}
	}
	if s.perSKU {
		out := make([][]stock.Item, len(items))
		for i := range items {
			out[i] = items[i : i+1]
		}
		return out
	}
	bySlot := map[int][]stock.Item{}
	for _, it := range items {
		k := keyslot.Slot(it.SKU)
		bySlot[k] = append(bySlot[k], it)
	}
	keys := make([]int, 0, len(bySlot))
	for k := range bySlot {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]stock.Item, 0, len(keys))
	for _, k := range keys {
		out = append(out, bySlot[k])
	}
	return out
}
