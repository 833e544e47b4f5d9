package redisstock_test

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// Migrate scans every master of a Cluster at once (ForEachMaster runs its
// function on one goroutine per master) and every goroutine counts into
// the one MigrateReport without a lock: the counts race (go test -race
// reports it; increments can be lost).
func TestReviewHotMigrateReportRaces(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx, p := fx.ctx(), fx.cfg.Prefix
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: p, Clock: fx.clock})
		const n = 300
		if _, err := fx.c.Pipelined(ctx, func(c redis.Pipeliner) error {
			c.SAdd(ctx, p+":skus", "k0")
			for i := range n {
				c.HSet(ctx, p+":{k"+strconv.Itoa(i)+"}:state", "avail", 1, "held", 0, "sold", 0, "limit", 0,
					"hold_ms", 60000, "ver", 1, "epoch", 1, "gen", "g")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rep, err := fx.s.Migrate(ctx)
		if err != nil || rep.States != n {
			t.Fatalf("Migrate = %+v, %v; want %d states", rep, err, n)
		}
	})
}
