package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
)

// On a Cluster the memory line counts every master: the SKU's keys on one,
// the directory's 16 shards on all three, summed as one key (dir:{*}),
// beside the open zset a Cluster's binds add (dir:{*}:open).
func TestMemoryByKeyOnACluster(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	prefix := "sgbenchmemc" + time.Now().Format("150405.000000000")
	t.Cleanup(func() {
		rdb.ForEachMaster(context.WithoutCancel(ctx), func(ctx context.Context, c *redis.Client) error {
			testdb.DropKeys(ctx, c, prefix)
			return nil
		})
	})
	const holds = 2000
	m, err := memoryPerHold(ctx, rdb, "Redis Cluster", prefix, holds)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]float64{}
	for _, k := range m.keys {
		per[k.name] += k.perHold
	}
	for _, name := range []string{"{hot}:lines", "dir:{*}", "dir:{*}:open", "{hot}:users"} {
		if per[name] < 8 {
			t.Errorf("%s takes %.1f B a hold, want at least 8: %+v", name, per[name], m.keys)
		}
	}
	if per["{hot}:holds"]+per["{hot}:hq"] < 8 {
		t.Errorf("the holds zset and queue take %.1f B a hold, want at least 8: %+v", per["{hot}:holds"]+per["{hot}:hq"], m.keys)
	}
	if m.perHold < per["{hot}:lines"]+per["dir:{*}"] {
		t.Errorf("%.0f B a hold in all, less than its line records and directory entries: %+v", m.perHold, m.keys)
	}
	if line := m.String(); !strings.HasPrefix(line, "Redis Cluster: ") {
		t.Errorf("memory line %q", line)
	}
}
