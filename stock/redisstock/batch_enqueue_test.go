package redisstock

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// The calls one earlier stage queues together leave together: with both
// in-flight slots free, a group within the batch size is one batch, not
// one batch per free slot and the rest after them; a larger group is split
// by the batch size, with at most maxFlying batches in flight.
func TestEnqueueSendsAGroupTogether(t *testing.T) {
	for _, tc := range []struct {
		max, n int
		want   []int
	}{
		{max: 8, n: 5, want: []int{5}},
		{max: 2, n: 5, want: []int{1, 2, 2}},
	} {
		var mu sync.Mutex
		var sizes []int
		flying, most := 0, 0
		release := make(chan struct{})
		b := &batcher{s: &Store{}, max: tc.max, run: func(_ context.Context, batch []*call) error {
			mu.Lock()
			sizes = append(sizes, len(batch))
			flying++
			most = max(most, flying)
			mu.Unlock()
			<-release
			mu.Lock()
			flying--
			mu.Unlock()
			return nil
		}}
		calls := make([]*call, tc.n)
		for i := range calls {
			calls[i] = &call{ctx: context.Background()}
		}
		b.enqueue(calls)
		close(release)
		for _, c := range calls {
			if err := b.wait(context.Background(), c); err != nil {
				t.Fatalf("max %d: call: %v", tc.max, err)
			}
		}
		slices.Sort(sizes)
		if !slices.Equal(sizes, tc.want) || most > maxFlying {
			t.Errorf("max %d, %d calls: batches %v (at most %d in flight), want %v (at most %d)", tc.max, tc.n, sizes, most, tc.want, maxFlying)
		}
		// The last batch's goroutine gives its slot back after its calls
		// are answered.
		idle := func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.flying == 0 && len(b.queue) == 0
		}
		for deadline := time.Now().Add(10 * time.Second); !idle(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("max %d: in-flight slots or queued calls left after the batches", tc.max)
			}
		}
	}
}
