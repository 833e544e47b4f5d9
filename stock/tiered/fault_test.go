package tiered_test

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/stockguard/stockguard/stock"
)

// errNet stands for a dropped connection.
var errNet = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}

// fault says how a flaky tier fails its next calls.
type fault int

const (
	healthy   fault = iota
	down            // fails before applying anything
	lostReply       // applies the call, then fails as if the reply was lost
)

// flaky wraps a Manager and fails its calls on demand; before, if set, runs
// at the start of every Deduct.
type flaky struct {
	stock.Manager
	mu     sync.Mutex
	f      fault
	only   string // if set, the fault applies to this method alone
	before func(o stock.Order)
}

func (f *flaky) set(x fault) { f.mu.Lock(); f.f, f.only = x, ""; f.mu.Unlock() }

// setOn makes only the named method ("Revert", "Deduct"...) fail.
func (f *flaky) setOn(x fault, method string) { f.mu.Lock(); f.f, f.only = x, method; f.mu.Unlock() }

func (f *flaky) do(method string, call func() error) error {
	f.mu.Lock()
	x := f.f
	if f.only != "" && f.only != method {
		x = healthy
	}
	f.mu.Unlock()
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
	if f.before != nil {
		f.before(o)
	}
	return f.do("Deduct", func() error { return f.Manager.Deduct(ctx, o) })
}

func (f *flaky) Confirm(ctx context.Context, id string) error {
	return f.do("Confirm", func() error { return f.Manager.Confirm(ctx, id) })
}

func (f *flaky) Revert(ctx context.Context, id string) error {
	return f.do("Revert", func() error { return f.Manager.Revert(ctx, id) })
}

func (f *flaky) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	var got []stock.Reclaimed
	err := f.do("ReclaimExpired", func() (err error) {
		got, err = f.Manager.(stock.Reclaimer).ReclaimExpired(ctx, limit)
		return err
	})
	return got, err
}

func (f *flaky) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	var got []stock.OrderInfo
	err := f.do("Orders", func() (err error) {
		got, err = f.Manager.(stock.OrderReader).Orders(ctx, ids)
		return err
	})
	return got, err
}
