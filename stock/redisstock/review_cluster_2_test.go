package redisstock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// staleGenHook holds the first generation read (HGET ... gen) it sees
// while blockGen is set until release, and, once armed, releases it at
// the second order-deadline read (HMGET pipeline: a retry's after a
// 'regen' refusal) or at o1's end, whichever comes first, and gives it
// time to cache what it read; D's bind then waits for o1's end (so that
// D's own 'regen' does not fix the cache first).
type staleGenHook struct {
	blockGen atomic.Bool
	blocked  chan struct{}
	release  chan struct{}
	once     sync.Once
	armed    atomic.Bool
	hmgets   atomic.Int64
	done     chan struct{}
}

// free releases the held generation read, once.
func (h *staleGenHook) free() { h.once.Do(func() { close(h.release) }) }

func (h *staleGenHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *staleGenHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *staleGenHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if isDeadlineRead(cmds) && h.armed.Load() && h.hmgets.Add(1) == 2 {
			h.free()
			time.Sleep(200 * time.Millisecond)
		}
		if c := cmds[0]; c.Name() == "hsetnx" && len(c.Args()) > 2 && c.Args()[2] == "d" && h.armed.Load() {
			<-h.done // D's bind waits for o1's end
		}
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "hget" && h.blockGen.CompareAndSwap(true, false) {
			close(h.blocked)
			<-h.release
		}
		return err
	}
}

// The Deduct's one bind-again after a 'regen' refusal reads the
// generations from the server, not from the Store's cache, which a
// concurrent Deduct's read, made before the gate was rebuilt and answered
// after the refusal, may have just filled with the old generation: the
// second attempt succeeds (it was refused again, and the Deduct failed
// with stock.ErrUnavailable though the SKUs were on sale).
func TestClusterRegenRetryReadsTheServer(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		h := &staleGenHook{blocked: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
		fx.c.AddHook(h)
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		// D reads a's generation (the old one) and is held before it
		// caches it.
		h.blockGen.Store(true)
		var wg sync.WaitGroup
		var errD error
		wg.Go(func() { errD = fx.s.Deduct(fx.ctx(), ord("d", "ud", it("a", 1))) })
		<-h.blocked
		// Another order caches both generations, then the gate is lost and
		// rebuilt.
		is(t, fx.s.Deduct(fx.ctx(), ord("warm", "u0", it("a", 1), it("b", 1))), nil, "warm")
		is(t, fx.s.Revert(fx.ctx(), "warm"), nil, "revert")
		fx.lose()
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		h.armed.Store(true)
		err := fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2), it("b", 1)))
		h.free()
		close(h.done)
		wg.Wait()
		t.Logf("D: %v", errD)
		if errors.Is(err, stock.ErrUnavailable) {
			lv, _ := fx.s.Levels(fx.ctx(), "a")
			fx.want("b", 10, 0, 0) // nothing held: a clean, spurious refusal
			t.Fatalf("Deduct after the rebuild: %v (a: %+v on sale)", err, lv)
		}
		is(t, err, nil, "Deduct after the rebuild")
	})
}

// isDeadlineRead reports whether cmds are orderDeadline's read (HMGET
// hold max_ms gen of every SKU).
func isDeadlineRead(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		a := c.Args()
		if c.Name() != "hmget" || len(a) != 5 || a[2] != "hold" || a[3] != "max_ms" || a[4] != "gen" {
			return false
		}
	}
	return len(cmds) > 0
}
