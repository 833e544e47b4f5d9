package limiter_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// Local drops a key only when MaxKeys keys are tracked, however the keys
// fall over its shards: with MaxKeys 100 and the default 64 shards, 65
// keys are all kept, and each keeps its count.
func TestLocalKeepsKeysBelowMaxKeys(t *testing.T) {
	clock := newManualClock()
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 1}, MaxKeys: 100, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 65
	allowed := 0
	for range 3 {
		for i := range keys {
			d, err := l.Allow(bg, "user-"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
	}
	if allowed != keys || l.Len() != keys {
		t.Fatalf("%d keys (MaxKeys 100), 1 event an hour each, 3 rounds at one instant: %d allowed, %d tracked; want %d allowed, %d tracked",
			keys, allowed, l.Len(), keys, keys)
	}
}

// Under concurrent new keys, Local tracks exactly MaxKeys once more than
// that many keys have come: never more, and no key is dropped early.
func TestLocalTracksExactlyMaxKeysUnderConcurrency(t *testing.T) {
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.PerSecond(1), MaxKeys: 100, Shards: 8, Clock: newManualClock()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if _, err := l.Allow(bg, strconv.Itoa(g)+"-"+strconv.Itoa(i)); err != nil {
					t.Error(err)
					return
				}
				if n := l.Len(); n > 100 {
					t.Errorf("tracking %d keys, MaxKeys is 100", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := l.Len(); n != 100 {
		t.Fatalf("after 4000 distinct keys: %d tracked; want MaxKeys, 100", n)
	}
}
