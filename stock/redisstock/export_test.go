package redisstock

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
