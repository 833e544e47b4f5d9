package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
)

// The memory line gives, besides the growth of used_memory, what each of
// the Store's keys takes per hold: every hold has a line record, a
// directory entry, a user count and a place in the hold queue or the holds
// zset, so those keys take at least a few bytes a hold each, and the
// SKU's state, a key of a few fields, is left out.
func TestMemoryByKey(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testdb.Need(t, testdb.Redis)})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	prefix := "sgbenchmem" + time.Now().Format("150405.000000000")
	t.Cleanup(func() { testdb.DropKeys(ctx, rdb, prefix) })
	const holds = 2000
	m, err := memoryPerHold(ctx, rdb, "Redis", prefix, holds)
	if err != nil {
		t.Fatal(err)
	}
	if m.holds != holds {
		t.Errorf("holds %d, want %d", m.holds, holds)
	}
	per := map[string]float64{}
	for i, k := range m.keys {
		if i > 0 && k.perHold > m.keys[i-1].perHold {
			t.Errorf("keys not largest first: %+v", m.keys)
		}
		kind := k.name
		if strings.HasPrefix(kind, "dir:") {
			kind = "dir:"
		}
		per[kind] += k.perHold
	}
	if per["{hot}:holds"]+per["{hot}:hq"] < 8 {
		t.Errorf("the holds zset and queue take %.1f B a hold, want at least 8: %+v", per["{hot}:holds"]+per["{hot}:hq"], m.keys)
	}
	for _, name := range []string{"{hot}:lines", "dir:", "{hot}:users"} {
		if per[name] < 8 {
			t.Errorf("%s takes %.1f B a hold, want at least 8: %+v", name, per[name], m.keys)
		}
	}
	if _, ok := per["{hot}:state"]; ok {
		t.Errorf("the state is listed: %+v", m.keys)
	}
	line := m.String()
	if !strings.Contains(line, "by key, MEMORY USAGE per hold: ") || !strings.Contains(line, "{hot}:lines ") {
		t.Errorf("memory line %q", line)
	}
}
