package redisstock

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// maxDirShards is how many hashes the order directory is split over where
// keys live on several servers (a Redis Cluster, a Ring): on a Cluster
// each is its own slot, spread over the slot ranges (see dirTags), so the
// directory's load is spread over the masters while the binds of a batch
// of Deducts go as one script call per shard. On one server the directory
// is one hash: a Deduct's script then reads and writes one key for the
// entries of the whole batch. The count is part of the key layout, kept in
// the layout mark: a Store follows the count its prefix was created with.
const maxDirShards = 16

// dirTags are the hash tags of the directory shards: shard i's is "d", i,
// a dot and the smallest k that puts it in the i-th of maxDirShards equal
// slot ranges, so that the shards are spread evenly over any Cluster whose
// masters own equal contiguous ranges.
var dirTags = func() (tags [maxDirShards]string) {
	firsts := slotRanges(maxDirShards)
	for i := range tags {
		tags[i] = nameIn("d"+strconv.Itoa(i)+".", firsts, i)
	}
	return tags
}()

// directory is the order directory's layout under one prefix: its shards'
// keys, their gone lists and open zsets, and the layout mark that names
// their count.
type directory struct {
	keys, gones, opens []string
	mark               string
}

// newDirectory is the directory of n shards (1 or maxDirShards) under
// prefix.
func newDirectory(prefix string, n int) *directory {
	d := &directory{keys: make([]string, n), gones: make([]string, n), opens: make([]string, n), mark: layoutMark(n)}
	for i := range n {
		d.keys[i] = prefix + ":dir:{" + dirTags[i] + "}"
		d.gones[i], d.opens[i] = d.keys[i]+goneSuffix, d.keys[i]+":open"
	}
	return d
}

// shard is the directory shard of an order ID.
func (d *directory) shard(order string) int {
	if len(d.keys) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(order))
	return int(h.Sum32() % uint32(len(d.keys)))
}

// Layout is the version of the key layout this package reads and writes:
// per-order data are fields of per-SKU and per-shard hashes, and the holds
// a one-server Deduct places at a SKU's deadlines in arrival order are
// entries of the SKU's hold queue, not members of its holds zset (version
// 3). Version 2 had no hold queue (its data are version 3's with every
// queue empty); version 1 (stockguard before it) wrote a key per order line
// and per order. See "Key layout" in the package doc.
const Layout = 3

// layoutMark is the registry member that says the Store's prefix holds
// layout 3 with an order directory of n shards: every write to the
// registry adds it. A registry without one was written by an earlier
// version. No SKU can be it: SKUs never contain braces.
func layoutMark(n int) string { return markOf(Layout, n) }

// markOf is the layout mark of layout v with a directory of n shards.
func markOf(v, n int) string { return "{layout:" + strconv.Itoa(v) + "/" + strconv.Itoa(n) + "}" }

// isMark reports whether a registry member is a mark, not a SKU.
func isMark(member string) bool { return strings.HasPrefix(member, "{") }

// ErrLayout is the error of a Store whose prefix holds data of another key
// layout (the registry of SKUs was written by an earlier version, without
// the layout mark): nothing is read or written until it is migrated
// ([Store.Migrate]). Errors that match it match stock.ErrUnavailable too:
// the gate cannot answer, and the breaker of package degrade sends traffic
// to the record.
var ErrLayout = errors.New("redisstock: the prefix holds data of an earlier key layout")

// layoutError is ErrLayout for one prefix of an earlier layout.
type layoutError struct {
	prefix string
	layout int // 1, or 2 (by its mark)
}

func (e *layoutError) Error() string {
	return ErrLayout.Error() + " (prefix " + strconv.Quote(e.prefix) + ", layout " + strconv.Itoa(e.layout) +
		"): run Store.Migrate with traffic stopped, or delete the prefix's keys and rebuild the gate from the record"
}

// Unwrap returns ErrLayout and stock.ErrUnavailable.
func (e *layoutError) Unwrap() []error { return []error{ErrLayout, stock.ErrUnavailable} }

// ready checks, once per Store, that the prefix holds this layout, and
// takes its directory's shard count from the mark: a registry of SKUs
// that exists without a mark was written by an earlier version, whose
// data this version would misread, and so was one with a mark of layout 2
// (its Stores neither read nor write hold queues). A prefix with no
// registry (new, or its registry key lost) follows the directory it finds
// (probeDirectory), else keeps the count New chose for the client (one
// shard on one server, maxDirShards where keys live on several). It costs
// a round trip or two on the Store's first call, none after it succeeds.
func (s *Store) ready(ctx context.Context) error {
	if s.layout.Load() {
		return nil
	}
	var exists *redis.IntCmd
	var marked *redis.BoolSliceCmd
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.registryKey())
		marked = p.SMIsMember(ctx, s.registryKey(), layoutMark(1), layoutMark(maxDirShards), markOf(2, 1), markOf(2, maxDirShards))
		return nil
	})
	if err != nil {
		return s.readErr(ctx, err)
	}
	m := marked.Val()
	switch {
	case len(m) != 4:
		return badReply(m)
	case m[2] || m[3]:
		return &layoutError{prefix: s.prefix, layout: 2}
	case m[0]:
		s.useDirectory(1)
	case m[1]:
		s.useDirectory(maxDirShards)
	case exists.Val() == 1:
		return &layoutError{prefix: s.prefix, layout: 1}
	default:
		if err := s.probeDirectory(ctx); err != nil {
			return err
		}
	}
	s.layout.Store(true)
	return nil
}

// probeDirectory makes a Store whose prefix has no registry, and so no
// layout mark, follow the directory's shard count from its keys: a prefix
// written by a Store of one count (its data moved from one server to a
// Cluster, or back) whose registry key alone was lost. Shard 0 of both
// counts is one key, so a directory of maxDirShards shows by a key of
// another shard, and one of a single shard by entries in shard 0 that
// another shard of maxDirShards would hold (the first page of a scan of
// shard 0, about 64 entries, all of them in a small hash: where every one
// of those belongs to shard 0, the shard is the directory's shard 0, or
// holds so few entries that the scan saw them all).
func (s *Store) probeDirectory(ctx context.Context) error {
	if len(s.dir.Load().keys) == 1 {
		wide := newDirectory(s.prefix, maxDirShards)
		cmds := make([]*redis.IntCmd, 0, maxDirShards-1)
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range wide.keys[1:] {
				cmds = append(cmds, p.Exists(ctx, k))
			}
			return nil
		})
		if err != nil {
			return s.readErr(ctx, err)
		}
		for _, c := range cmds {
			if c.Val() == 1 {
				s.useDirectory(maxDirShards)
				break
			}
		}
		return nil
	}
	d := s.dir.Load()
	kv, _, err := s.c.HScan(ctx, d.keys[0], 0, "", 64).Result()
	if err != nil && err != redis.Nil {
		return s.readErr(ctx, err)
	}
	for i := 0; i < len(kv); i += 2 { // field, value, ...
		if d.shard(kv[i]) != 0 {
			s.useDirectory(1)
			break
		}
	}
	return nil
}

// useDirectory makes the Store use a directory of n shards, if it does not.
func (s *Store) useDirectory(n int) {
	if len(s.dir.Load().keys) != n {
		s.dir.Store(newDirectory(s.prefix, n))
	}
}

// dirKey is the directory shard that holds the order's entry.
func (s *Store) dirKey(order string) string {
	d := s.dir.Load()
	return d.keys[d.shard(order)]
}

// dirKeys are the order's directory shard, its gone list and its open
// zset.
func (s *Store) dirKeys(order string) []string {
	d := s.dir.Load()
	k := d.shard(order)
	return []string{d.keys[k], d.gones[k], d.opens[k]}
}

// mark is the layout mark of the Store's directory.
func (s *Store) mark() string { return s.dir.Load().mark }
