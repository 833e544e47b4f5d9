package redisstock

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// Queued returns how many Deducts wait for a batch to be sent (on a Redis
// Cluster, summed over the slots).
func (s *Store) Queued() int {
	n := 0
	if s.batch != nil {
		n += s.batch.queued()
	}
	if s.slots != nil {
		s.slots.m.Range(func(_, b any) bool {
			n += b.(*batcher).queued()
			return true
		})
	}
	return n
}

// queued returns how many callers wait for a batch.
func (b *batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// DeductScriptHash is the SHA1 of stock_deduct.lua.
func DeductScriptHash() string { return deductScript.Hash() }

// BucketNames returns the names of the n buckets of sku, as the Store
// names them.
func BucketNames(sku string, n int) []string { return bucketNames(sku, n) }

// BucketHome returns the bucket (of n) an order of user, or without a
// user of order ID id, goes to.
func BucketHome(n int, user, id string) int {
	b := buckets{names: make([]string, n)}
	return b.home(user, id)
}

// BucketOut runs only the first step of a transfer of qty units from
// bucket from to bucket to of sku's n buckets, under transfer ID id: a
// refill whose process died right after taking the units out. It returns
// the units taken.
func (s *Store) BucketOut(ctx context.Context, sku string, n, from, to int, id string, qty int64) (int64, error) {
	names := bucketNames(sku, n)
	gen, err := s.c.HGet(ctx, s.stateKey(names[to]), "gen").Result()
	if err != nil {
		return 0, err
	}
	res, err := bucketOutScript.Run(ctx, s.c, []string{s.stateKey(names[from]), s.skuKey(names[from], outSuffix, "")},
		id, qty, names[to], s.nowMs(), gen, s.departureTTL().Milliseconds()).Slice()
	if err != nil {
		return 0, err
	}
	if code, _ := replyCode(res); code != "ok" || len(res) != 3 {
		return 0, badReply(res)
	}
	got, _ := res[1].(int64)
	return got, nil
}

// BucketOutIn runs the out and in steps of a transfer but not the clear:
// a refill whose process died before clearing the departure record.
func (s *Store) BucketOutIn(ctx context.Context, sku string, n, from, to int, id string, qty int64) (int64, error) {
	got, err := s.BucketOut(ctx, sku, n, from, to, id, qty)
	if err != nil || got == 0 {
		return got, err
	}
	names := bucketNames(sku, n)
	gen, err := s.c.HGet(ctx, s.stateKey(names[to]), "gen").Result()
	if err != nil {
		return 0, err
	}
	words, err := s.arrive(ctx, names[to], "in", []pending{{id: id, departure: departure{units: got, gen: gen}}})
	if err != nil {
		return 0, err
	}
	if words[0] != "in" {
		return 0, badReply(words)
	}
	return got, nil
}

// BucketOutScriptHash is the SHA1 of stock_bucket_out.lua.
func BucketOutScriptHash() string { return bucketOutScript.Hash() }

// SlotRanges is slotRanges.
var SlotRanges = slotRanges

// BucketInScriptHash is the SHA1 of stock_bucket_in.lua.
func BucketInScriptHash() string { return bucketInScript.Hash() }

// BucketLeaseScriptHash is the SHA1 of stock_bucket_lease.lua.
func BucketLeaseScriptHash() string { return bucketLeaseScript.Hash() }

// Line is a line record as a test reads it: its fields by their names in
// the record's codec ("st", "qty", "dl", "mx", "id", "at", "ret", "e", and
// "r:<op>" per return applied), "" for a field it lacks. ok is false when
// there is no record, or its retention has passed by the server's clock.
func (s *Store) Line(ctx context.Context, sku, order string) (map[string]string, bool, error) {
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return nil, false, err
	}
	v, err := s.c.HGet(ctx, s.linesKey(sku), order).Result()
	if err != nil && err != redis.Nil {
		return nil, false, err
	}
	r, ok, err := parseRecord(v, now.UnixMilli())
	if err != nil || !ok {
		return nil, ok, err
	}
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	f := map[string]string{"st": r.st, "qty": num(r.qty), "dl": num(r.dl), "mx": num(r.mx), "id": r.ident,
		"at": r.at, "ret": num(r.ret), "e": num(r.e)}
	for op, sig := range r.ops {
		f["r:"+op] = sig
	}
	return f, true, nil
}

// Entry reads the order's directory entry: its identity and when it stops
// being read (ms, the server's time; 0 while the order lives). ok is false
// when there is none, or its retention has passed by the server's clock.
func (s *Store) Entry(ctx context.Context, order string) (ident string, ends int64, ok bool, err error) {
	now, err := s.c.Time(ctx).Result()
	if err != nil {
		return "", 0, false, err
	}
	v, err := s.c.HGet(ctx, s.dirKey(order), order).Result()
	if err != nil && err != redis.Nil {
		return "", 0, false, err
	}
	d, ok, err := parseEntry(v, now.UnixMilli())
	return d.ident, d.e, ok, err
}

// DirKey is the directory shard holding the order's entry.
func (s *Store) DirKey(order string) string { return s.dirKey(order) }

// LinesKey is the hash of sku's line records.
func (s *Store) LinesKey(sku string) string { return s.linesKey(sku) }

// GoneKey lists sku's ended line records.
func (s *Store) GoneKey(sku string) string { return s.goneKey(sku) }

// HotScriptHash and BatchScriptHash are the SHA1s of stock_deduct_hot.lua
// and stock_deduct_batch.lua, OneScriptHash stock_deduct_one.lua's (the
// hot script's work for a batch of one order).
func HotScriptHash() string { return hotScript.Hash() }

// OneScriptHash: see HotScriptHash.
func OneScriptHash() string { return oneScript.Hash() }

// HotAlone runs o, alone, through stock_deduct_one.lua (one), or through
// stock_deduct_hot.lua as a batch of one: whether the script left it to
// the general script (left, with err nil), and the order's outcome or the
// call's error.
func (s *Store) HotAlone(ctx context.Context, o stock.Order, one bool) (left bool, err error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	c := &call{ctx: ctx}
	s.prepare(&c.o, o)
	script, source := hotScript, hotSource
	if one {
		script, source = oneScript, oneSource
	}
	slow, err := s.runHot(ctx, []*call{c}, script, source)
	if err != nil {
		return false, err
	}
	return len(slow) == 1, c.err
}

// QueuePeekScriptHash is the SHA1 of stock_queue_peek.lua, the read-only
// peek of a hold queue's head.
func QueuePeekScriptHash() string { return queuePeekScript.Hash() }
func BatchScriptHash() string     { return batchScript.Hash() }

// FlightWant is the units the refill of sku under way in this Store
// brings to its bucket (its own order's line and those of the Deducts
// waiting for it), 0 with none under way.
func (s *Store) FlightWant(sku string) int64 {
	if v, ok := s.flights.Load(sku); ok {
		return v.(*flight).want.Load()
	}
	return 0
}

// LoadAllScripts loads every script of the Store on its servers, as a
// server has them once a Store has run each of its calls there.
func (s *Store) LoadAllScripts(ctx context.Context) error { return s.loadScripts(ctx, allScripts) }

// ScriptCount returns how many scripts the Store has.
func ScriptCount() int { return len(allScripts) }
