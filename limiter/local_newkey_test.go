package limiter_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// Concurrent first calls of one new key, with MaxKeys-1 keys tracked, add
// it once and drop no key: a key is dropped only for a new one while
// MaxKeys are tracked, so a drained bucket stays drained.
func TestLocalConcurrentFirstCallsOfANewKeyDropNoKey(t *testing.T) {
	clk := newManualClock()
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 1}, MaxKeys: 2, Shards: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(bg, "victim"); !d.Allowed {
		t.Fatal("victim's first call refused")
	}
	const rounds, callers = 3000, 8
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _ = l.Allow(bg, "new")
			}()
		}
		close(start)
		wg.Wait()
		if n := l.Len(); n != 2 {
			t.Fatalf("round %d: %d keys tracked after 2 distinct keys with MaxKeys 2; want 2 (a key was dropped below MaxKeys)", round, n)
		}
		if d, _ := l.Allow(bg, "victim"); d.Allowed {
			t.Fatalf("round %d: victim (bucket of 1, drained, no time passed) allowed again: it was dropped though only 2 keys, MaxKeys, were ever tracked", round)
		}
		if err := l.Reset(bg, "new"); err != nil {
			t.Fatal(err)
		}
	}
}
