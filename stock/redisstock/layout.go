package redisstock

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
)

// dirShards is how many hashes the order directory is split over. On a
// Redis Cluster each is its own slot, spread over the slot ranges (see
// dirTags), so the directory's load is spread over the masters while the
// binds of a batch of Deducts go as one script call per shard. The count
// is part of the key layout: changing it loses every entry.
const dirShards = 16

// dirTags are the hash tags of the directory shards: shard i's is "d", i,
// a dot and the smallest k that puts it in the i-th of dirShards equal
// slot ranges, so that the shards are spread evenly over any Cluster whose
// masters own equal contiguous ranges.
var dirTags = func() [dirShards]string {
	var tags [dirShards]string
	firsts := slotRanges(dirShards)
	for i := range tags {
		for k := 0; ; k++ {
			tag := "d" + strconv.Itoa(i) + "." + strconv.Itoa(k)
			if r, _ := slices.BinarySearch(firsts, keyslot.Slot(tag)+1); r-1 == i {
				tags[i] = tag
				break
			}
		}
	}
	return tags
}()

// dirShard is the directory shard of an order ID.
func dirShard(order string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(order))
	return int(h.Sum32() % dirShards)
}

// Layout is the version of the key layout this package reads and writes:
// per-order data are fields of per-SKU and per-shard hashes (version 2),
// where version 1 (stockguard before it) wrote a key per order line and
// per order. See "Key layout" in the package doc.
const Layout = 2

// layoutMark is the registry member that says the Store's prefix holds
// layout 2: every write to the registry adds it. A registry without it was
// written by an earlier version. No SKU can be it: SKUs never contain
// braces.
const layoutMark = "{layout:2}"

// ErrLayout is the error of a Store whose prefix holds data of another key
// layout (the registry of SKUs was written by an earlier version, without
// the layout mark): nothing is read or written until it is migrated
// ([Store.Migrate]). Errors that match it match stock.ErrUnavailable too:
// the gate cannot answer, and the breaker of package degrade sends traffic
// to the record.
var ErrLayout = errors.New("redisstock: the prefix holds data of an earlier key layout")

// layoutError is ErrLayout for one prefix.
type layoutError struct{ prefix string }

func (e *layoutError) Error() string {
	return ErrLayout.Error() + " (prefix " + strconv.Quote(e.prefix) + ", layout 1): run Store.Migrate with traffic stopped, or delete the prefix's keys and rebuild the gate from the record"
}

// Unwrap returns ErrLayout and stock.ErrUnavailable.
func (e *layoutError) Unwrap() []error { return []error{ErrLayout, stock.ErrUnavailable} }

// ready checks, once per Store, that the prefix holds this layout: a
// registry of SKUs that exists without the layout mark was written by an
// earlier version, whose data this version would misread. It costs one
// round trip on the Store's first call, none after it succeeds.
func (s *Store) ready(ctx context.Context) error {
	if s.layout.Load() {
		return nil
	}
	var exists *redis.IntCmd
	var marked *redis.BoolCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.registryKey())
		marked = p.SIsMember(ctx, s.registryKey(), layoutMark)
		return nil
	})
	if err != nil {
		return s.readErr(ctx, "read the key layout", err)
	}
	if exists.Val() == 1 && !marked.Val() {
		return &layoutError{prefix: s.prefix}
	}
	s.layout.Store(true)
	return nil
}
