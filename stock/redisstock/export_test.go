package redisstock

import "context"

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
		return 0, badReply("test out", res)
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
	words, _, err := s.arrive(ctx, names[to], "in", []arrival{{id: id, units: got, gen: gen}})
	if err != nil {
		return 0, err
	}
	if words[0] != "in" {
		return 0, badReply("test in", words)
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
