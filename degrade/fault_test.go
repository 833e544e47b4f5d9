package degrade_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/stockguard/stockguard/stock"
)

// errNet stands for a dropped connection.
var errNet = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}

type fault int

const (
	healthy   fault = iota
	down            // fails before applying anything
	lostReply       // applies the call, then fails as if the reply was lost
)

// flaky wraps a Manager, fails its calls on demand (all of them, or only
// those about one SKU) and counts the calls that reached it.
type flaky struct {
	stock.Manager
	mu      sync.Mutex
	f       fault
	onlySKU string
	deducts atomic.Int64
	calls   atomic.Int64
}

func (f *flaky) set(x fault) { f.mu.Lock(); f.f = x; f.onlySKU = ""; f.mu.Unlock() }

func (f *flaky) setSKU(sku string, x fault) { f.mu.Lock(); f.f = x; f.onlySKU = sku; f.mu.Unlock() }

func (f *flaky) do(skus []string, call func() error) error {
	f.calls.Add(1)
	f.mu.Lock()
	x, only := f.f, f.onlySKU
	f.mu.Unlock()
	if only != "" {
		hit := false
		for _, s := range skus {
			hit = hit || s == only
		}
		if !hit {
			x = healthy
		}
	}
	switch x {
	case down:
		return errNet
	case lostReply:
		_ = call()
		return errNet
	}
	return call()
}

func (f *flaky) Deduct(ctx context.Context, o stock.Order) error {
	f.deducts.Add(1)
	var skus []string
	for _, it := range o.Items {
		skus = append(skus, it.SKU)
	}
	return f.do(skus, func() error { return f.Manager.Deduct(ctx, o) })
}

func (f *flaky) Confirm(ctx context.Context, id string) error {
	return f.do(nil, func() error { return f.Manager.Confirm(ctx, id) })
}

func (f *flaky) Revert(ctx context.Context, id string) error {
	return f.do(nil, func() error { return f.Manager.Revert(ctx, id) })
}

func (f *flaky) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	var lv stock.Levels
	err := f.do([]string{sku}, func() (err error) { lv, err = f.Manager.Levels(ctx, sku); return err })
	return lv, err
}

func (f *flaky) Available(ctx context.Context, sku string) (int64, error) {
	var n int64
	err := f.do([]string{sku}, func() (err error) { n, err = f.Manager.Available(ctx, sku); return err })
	return n, err
}

func (f *flaky) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	return f.Manager.(stock.Reclaimer).ReclaimExpired(ctx, limit)
}
