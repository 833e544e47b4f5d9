package redisstock

// Queued returns how many Deducts wait for a batch to be sent.
func (s *Store) Queued() int {
	if s.batch == nil {
		return 0
	}
	return s.batch.queued()
}
