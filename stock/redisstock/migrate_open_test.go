package redisstock_test

import "testing"

// Migrate gives each entry it converts that has not ended its member in
// its shard's open zset, as a bind does, so that the reclaimer settles it
// as any other: the entry of an order that took nothing is deleted once
// its attempts' lease has passed (before, it was stored for good, an
// orphan to Audit).
func TestMigratedEntryIsSettled(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		migrateLeasedOrder(t, fx)
		fx.audit(-1)
		settledAway(t, fx, "o1")
		fx.audit(0)
		fx.want("a", 10, 0, 0)
	})
}
