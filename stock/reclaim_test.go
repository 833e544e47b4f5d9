package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// fakeReclaimer hands out a fixed backlog in batches, then fails once.
type fakeReclaimer struct {
	mu      sync.Mutex
	backlog int
	calls   int
	failAt  int
	done    chan struct{}
}

func (f *fakeReclaimer) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == f.failAt {
		return nil, errors.New("boom")
	}
	n := min(limit, f.backlog)
	f.backlog -= n
	if f.backlog == 0 && f.done != nil {
		close(f.done)
		f.done = nil
	}
	return make([]stock.Reclaimed, n), nil
}

func TestRunReclaimerDrainsBacklogAndStops(t *testing.T) {
	f := &fakeReclaimer{backlog: 1000, failAt: -1, done: make(chan struct{})}
	done := f.done
	var got int
	var errs []error
	ctx, cancel := context.WithCancel(t.Context())
	finished := make(chan error)
	go func() {
		finished <- stock.RunReclaimer(ctx, f, stock.ReclaimerConfig{
			BatchSize: 64,
			Interval:  time.Hour, // the backlog must drain without waiting for a tick
			OnReclaim: func(r []stock.Reclaimed) { got += len(r) },
			OnError:   func(err error) { errs = append(errs, err) },
		})
	}()
	<-done
	cancel()
	if err := <-finished; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunReclaimer returned %v, want context.Canceled", err)
	}
	if got != 1000 || len(errs) != 0 {
		t.Fatalf("reclaimed %d with errors %v; want 1000 and none", got, errs)
	}
}

func TestRunReclaimerReportsErrorsAndGoesOn(t *testing.T) {
	f := &fakeReclaimer{backlog: 10, failAt: 1, done: make(chan struct{})}
	done := f.done
	var errs []error
	var got int
	ctx, cancel := context.WithCancel(t.Context())
	finished := make(chan error)
	go func() {
		finished <- stock.RunReclaimer(ctx, f, stock.ReclaimerConfig{
			BatchSize: 4,
			Interval:  time.Millisecond,
			OnReclaim: func(r []stock.Reclaimed) { got += len(r) },
			OnError:   func(err error) { errs = append(errs, err) },
		})
	}()
	<-done
	cancel()
	<-finished
	if got != 10 || len(errs) != 1 {
		t.Fatalf("reclaimed %d with %d errors; want 10 and 1", got, len(errs))
	}
}
