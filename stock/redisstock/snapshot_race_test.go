package redisstock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// dropBetween holds the pipeline of an undone Deduct's drop (the release
// script) until a Snapshot's script has run, and holds that Snapshot
// until the drop is done: the drop falls between the Snapshot's two round
// trips. The Snapshot's script waits for the drop to be held first, as a
// Snapshot may come while the Deduct is still between its first round
// trip and its undo. A step that never comes is recorded in err after
// 10 s instead of hanging the package.
type dropBetween struct {
	mu                     sync.Mutex
	armed                  bool
	err                    error
	pending, drop, dropped chan struct{}
	snapSHA, dropSHA       string
}

func has(cmds []redis.Cmder, sha string) bool {
	return slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
		a := c.Args()
		return c.Name() == "evalsha" && len(a) > 1 && a[1] == sha
	})
}

// wait waits for ch, at most 10 s, and records in h.err a wait that ends
// otherwise.
func (h *dropBetween) wait(ctx context.Context, ch <-chan struct{}, what string) {
	var err error
	select {
	case <-ch:
		return
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(10 * time.Second):
		err = errors.New("test hook: waited 10 s for " + what)
	}
	h.mu.Lock()
	h.err = errors.Join(h.err, err)
	h.mu.Unlock()
}

func (h *dropBetween) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *dropBetween) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *dropBetween) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *dropBetween) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		armed := h.armed
		h.mu.Unlock()
		switch {
		case armed && has(cmds, h.dropSHA):
			close(h.pending)
			h.wait(ctx, h.drop, "a Snapshot's script")
			err := next(ctx, cmds)
			close(h.dropped)
			return err
		case armed && has(cmds, h.snapSHA):
			h.wait(ctx, h.pending, "the Deduct's drop")
			err := next(ctx, cmds)
			h.mu.Lock()
			h.armed = false
			h.mu.Unlock()
			close(h.drop)
			h.wait(ctx, h.dropped, "the drop to end")
			return err
		}
		return next(ctx, cmds)
	}
}

// A Deduct on a Cluster of an order on two slots takes its first slot
// group (SKU a), then finds the second (SKU x, of a higher slot) sold out
// and drops the first, deleting the hold's record. A
// Snapshot whose script saw the hold and whose second round trip finds the
// record gone must not report it Lost (a hold Redis will never return):
// its units were in the available count read, so a reconciler leaving them
// out of the units in flight would raise Redis by them.
func TestSnapshotReadsAgainAHoldDroppedBetweenItsRoundTrips(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		fx.sale("a", 10, 0, 0)
		fx.sale("x", 1, 0, 0)
		h := &dropBetween{pending: make(chan struct{}), drop: make(chan struct{}), dropped: make(chan struct{}),
			snapSHA: redis.NewScript(lua.Script("stock_snapshot.lua")).Hash(),
			dropSHA: redis.NewScript(lua.Script("stock_release.lua")).Hash()}
		fx.loadScripts()
		fx.c.AddHook(h)
		refused := func(id string) error {
			return fx.s.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "x", Qty: 2}}})
		}
		// Once unhooked: the scripts are loaded, and the drop is real.
		if err := refused("warm"); !errors.Is(err, stock.ErrSoldOut) {
			t.Fatalf("Deduct of an order whose second slot group is sold out: %v, want ErrSoldOut", err)
		}
		if _, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "a"}}); err != nil {
			t.Fatal(err)
		}
		fx.want("a", 10, 0, 0)

		h.mu.Lock()
		h.armed = true
		h.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- refused("o1") }()
		waitFor(t, "the refused Deduct's hold", func() bool {
			lv, err := fx.s.Levels(ctx, "a")
			return err == nil && lv.Held == 1
		})
		got, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "a"}})
		derr := <-done
		if err != nil {
			t.Fatalf("Snapshot: %v (the refused Deduct: %v)", err, derr)
		}
		if !errors.Is(derr, stock.ErrSoldOut) {
			t.Fatalf("the refused Deduct: %v, want ErrSoldOut", derr)
		}
		if err := h.failed(); err != nil {
			t.Fatal(err)
		}
		sn := got[0]
		var held int64
		for _, hd := range sn.Holds {
			held += hd.Qty
		}
		if len(sn.Lost) != 0 || sn.Held != held || sn.Available+sn.Held != 10 {
			t.Fatalf("snapshot: available %d, held %d, holds %+v, lost %v; want every held unit in Holds, none lost",
				sn.Available, sn.Held, sn.Holds, sn.Lost)
		}
		fx.want("a", 10, 0, 0)
	})
}

// The registry, the set ReclaimExpired finds SKUs in, can be lost alone:
// on a Cluster its key lives on one master, which may lose its data while
// the others keep theirs (or the key is evicted). The SKUs whose states
// survived still have holds; a Snapshot of such a SKU (every reconcile
// pass reads one) puts it back, so that its holds are returned at their
// deadline instead of being held for ever.
func TestSnapshotPutsBackASKUTheRegistryLost(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		fx.sale("a", 10, 0, time.Minute)
		if err := fx.s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
			t.Fatal(err)
		}
		if err := fx.c.Del(ctx, fx.cfg.Prefix+":skus").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "a"}}); err != nil {
			t.Fatal(err)
		}
		fx.clock.Advance(2 * time.Minute)
		got, err := fx.s.ReclaimExpired(ctx, 10)
		if err != nil || len(got) != 1 || got[0].OrderID != "o1" || got[0].Qty != 2 {
			t.Fatalf("ReclaimExpired after the registry was lost and the SKU read: %v, %+v; want o1's 2 units", err, got)
		}
		fx.want("a", 10, 0, 0)
		// The registry was recreated, so it says it may be incomplete: a
		// SKU with no state reads as lost until a full pass says otherwise.
		err = fx.s.Deduct(ctx, stock.Order{ID: "o2", Items: []stock.Item{{SKU: "never", Qty: 1}}})
		if !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("Deduct of a SKU with no state after the registry was recreated: %v, want ErrUnavailable", err)
		}
	})
}
