package redisstock

// Queued returns how many Deducts wait for a batch to be sent.
func (s *Store) Queued() int {
	if s.batch == nil {
		return 0
	}
	return s.batch.queued()
}

// SlotQueued returns how many Deducts wait for a batch of their slot on a
// Redis Cluster.
func (s *Store) SlotQueued() int {
	if s.slots == nil {
		return 0
	}
	n := 0
	s.slots.m.Range(func(_, b any) bool {
		n += b.(*batcher).queued()
		return true
	})
	return n
}

// DeductScriptHash is the SHA1 of stock_deduct.lua.
func DeductScriptHash() string { return deductScript.Hash() }
