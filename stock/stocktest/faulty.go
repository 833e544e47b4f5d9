package stocktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Fault says how a Faulty fails the calls it applies to.
type Fault int

const (
	// Healthy passes the call through unchanged.
	Healthy Fault = iota
	// Down fails the call before it reaches the wrapped Manager: nothing
	// is applied, as when the store cannot be reached.
	Down
	// LostReply applies the call to the wrapped Manager, discards its
	// result and fails, as when the connection drops after the store
	// acted: the caller cannot tell whether the call took effect, and the
	// error matches stock.ErrUnknownOutcome, as a store's does by the
	// outcome rule of package stock.
	LostReply
	// Unavailable fails the call before it reaches the wrapped Manager
	// with an error matching stock.ErrUnavailable: nothing is applied, as
	// when a Redis gate lost its data and has not been rebuilt.
	Unavailable
)

// String returns the fault's name.
func (x Fault) String() string {
	switch x {
	case Healthy:
		return "Healthy"
	case Down:
		return "Down"
	case LostReply:
		return "LostReply"
	case Unavailable:
		return "Unavailable"
	}
	return fmt.Sprintf("Fault(%d)", int(x))
}

// ErrInjected is wrapped by every error a Faulty injects, never a business
// error (stock.IsBusiness is false), so the code under test sees an
// infrastructure failure; match it with errors.Is(err, ErrInjected). Down
// and LostReply inject a *net.OpError (a net.Error with Timeout false),
// LostReply's also matching stock.ErrUnknownOutcome; Unavailable an error
// that also matches stock.ErrUnavailable.
var ErrInjected = errors.New("stocktest: injected fault")

// Call describes one call reaching a Faulty, for filters and hooks.
type Call struct {
	// Method is the name of the called method: "PutOnSale", "Restock",
	// "Deduct", "Confirm", "Revert", "Available", "Levels",
	// "ReclaimExpired", "Orders", "UserUnits", "HeldBefore", "RevertItems"
	// or "ExtendHold". A call of
	// RevertHeld (stock.HoldReverter) is a "Revert": a fault, hook or
	// count aimed at the store's reverts meets both.
	Method string
	// SKUs are the SKUs the call names: the order's lines for Deduct
	// (in item order), the one SKU of PutOnSale, Restock, Available,
	// Levels and UserUnits; nil otherwise.
	SKUs []string
	// OrderID is the order of Deduct, Confirm, Revert, RevertItems or
	// ExtendHold; empty otherwise.
	OrderID string
	// OrderIDs are the IDs asked of Orders; nil otherwise.
	OrderIDs []string
}

// OnMethod returns a filter matching calls of the named methods.
func OnMethod(methods ...string) func(Call) bool {
	return func(c Call) bool {
		for _, m := range methods {
			if c.Method == m {
				return true
			}
		}
		return false
	}
}

// OnSKU returns a filter matching calls that name sku (see Call.SKUs):
// calls naming only an order ID, such as Confirm, never match.
func OnSKU(sku string) func(Call) bool {
	return func(c Call) bool {
		for _, s := range c.SKUs {
			if s == sku {
				return true
			}
		}
		return false
	}
}

// Faulty wraps a stock.Manager and fails its calls on demand, to test how
// code built on a Manager (a tiered or degrading wrapper, a checkout
// service) behaves when the store is down or a reply is lost. It counts the
// calls that reach it per method and can run a hook before each call. The
// embedded Manager is the wrapped one: calling it directly bypasses faults,
// counters and hook. A Faulty is safe for concurrent use; it starts
// Healthy.
//
// Every method of stock.Manager, stock.Reclaimer, stock.OrderReader,
// stock.HoldLister, stock.HoldReverter, stock.PartialReverter and
// stock.HoldExtender goes through the fault: the optional interfaces are
// forwarded to the wrapped Manager, and fail with an error wrapping
// errors.ErrUnsupported when it does not implement them. That is the rule
// for any wrapper of a store (metrics, tracing, faults): forward every
// interface the wrapped store implements, since code such as package
// stock/tiered needs them (and asks for them in its types). Code that
// type-asserts the optional interfaces should be given Narrow instead.
type Faulty struct {
	stock.Manager

	mu     sync.Mutex
	fault  Fault
	match  func(Call) bool
	before func(Call)
	calls  map[string]int64
}

var _ interface {
	stock.Manager
	stock.Reclaimer
	stock.OrderReader
	stock.HoldLister
	stock.HoldReverter
	stock.PartialReverter
	stock.HoldExtender
} = (*Faulty)(nil)

// NewFaulty returns a Healthy Faulty wrapping m.
func NewFaulty(m stock.Manager) *Faulty {
	return &Faulty{Manager: m, calls: make(map[string]int64)}
}

// SetFault makes every later call fail with x (Healthy: none fails).
func (f *Faulty) SetFault(x Fault) { f.SetFaultFor(x, nil) }

// SetFaultFor makes later calls for which match returns true fail with x;
// the others pass through. A nil match matches every call. It replaces any
// earlier setting.
func (f *Faulty) SetFaultFor(x Fault, match func(Call) bool) {
	f.mu.Lock()
	f.fault, f.match = x, match
	f.mu.Unlock()
}

// SetBefore makes hook run at the start of every later call, before the
// call is counted or its fault decided; nil removes it. The hook runs with
// no lock held, so it may call the Faulty (the calls it makes run the hook
// too) or SetBefore.
func (f *Faulty) SetBefore(hook func(Call)) {
	f.mu.Lock()
	f.before = hook
	f.mu.Unlock()
}

// Calls returns how many calls of the named method reached the Faulty,
// failed ones included.
func (f *Faulty) Calls(method string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// TotalCalls returns how many calls of any method reached the Faulty,
// failed ones included.
func (f *Faulty) TotalCalls() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, c := range f.calls {
		n += c
	}
	return n
}

// do runs the hook, counts c and applies the fault to run.
func (f *Faulty) do(c Call, run func() error) error {
	f.mu.Lock()
	hook := f.before
	f.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	f.mu.Lock()
	f.calls[c.Method]++
	x := f.fault
	if f.match != nil && !f.match(c) {
		x = Healthy
	}
	f.mu.Unlock()
	switch x {
	case Down:
		return &net.OpError{Op: "dial", Net: "tcp", Err: ErrInjected}
	case LostReply:
		_ = run()
		return fmt.Errorf("%w: %w", stock.ErrUnknownOutcome, &net.OpError{Op: "read", Net: "tcp", Err: ErrInjected})
	case Unavailable:
		return fmt.Errorf("%w: %w", stock.ErrUnavailable, ErrInjected)
	}
	return run()
}

// PutOnSale calls the wrapped Manager's PutOnSale through the fault.
func (f *Faulty) PutOnSale(ctx context.Context, l stock.Listing) error {
	return f.do(Call{Method: "PutOnSale", SKUs: []string{l.SKU}}, func() error {
		return f.Manager.PutOnSale(ctx, l)
	})
}

// Restock calls the wrapped Manager's Restock through the fault.
func (f *Faulty) Restock(ctx context.Context, r stock.Restock) error {
	return f.do(Call{Method: "Restock", SKUs: []string{r.SKU}}, func() error {
		return f.Manager.Restock(ctx, r)
	})
}

// Deduct calls the wrapped Manager's Deduct through the fault.
func (f *Faulty) Deduct(ctx context.Context, o stock.Order) error {
	skus := make([]string, len(o.Items))
	for i, it := range o.Items {
		skus[i] = it.SKU
	}
	return f.do(Call{Method: "Deduct", SKUs: skus, OrderID: o.ID}, func() error {
		return f.Manager.Deduct(ctx, o)
	})
}

// Confirm calls the wrapped Manager's Confirm through the fault.
func (f *Faulty) Confirm(ctx context.Context, orderID string) error {
	return f.do(Call{Method: "Confirm", OrderID: orderID}, func() error {
		return f.Manager.Confirm(ctx, orderID)
	})
}

// Revert calls the wrapped Manager's Revert through the fault.
func (f *Faulty) Revert(ctx context.Context, orderID string) error {
	return f.do(Call{Method: "Revert", OrderID: orderID}, func() error {
		return f.Manager.Revert(ctx, orderID)
	})
}

// Available calls the wrapped Manager's Available through the fault.
func (f *Faulty) Available(ctx context.Context, sku string) (int64, error) {
	var n int64
	err := f.do(Call{Method: "Available", SKUs: []string{sku}}, func() (err error) {
		n, err = f.Manager.Available(ctx, sku)
		return err
	})
	return n, err
}

// Levels calls the wrapped Manager's Levels through the fault.
func (f *Faulty) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	var lv stock.Levels
	err := f.do(Call{Method: "Levels", SKUs: []string{sku}}, func() (err error) {
		lv, err = f.Manager.Levels(ctx, sku)
		return err
	})
	return lv, err
}

// ReclaimExpired calls the wrapped Manager's ReclaimExpired through the
// fault, or fails with errors.ErrUnsupported if it is not a
// stock.Reclaimer.
func (f *Faulty) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	var got []stock.Reclaimed
	err := f.do(Call{Method: "ReclaimExpired"}, func() (err error) {
		r, ok := f.Manager.(stock.Reclaimer)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.Reclaimer: %w", f.Manager, errors.ErrUnsupported)
		}
		got, err = r.ReclaimExpired(ctx, limit)
		return err
	})
	return got, err
}

// Orders calls the wrapped Manager's Orders through the fault, or fails
// with errors.ErrUnsupported if it is not a stock.OrderReader.
func (f *Faulty) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	var got []stock.OrderInfo
	err := f.do(Call{Method: "Orders", OrderIDs: ids}, func() (err error) {
		rd, ok := f.Manager.(stock.OrderReader)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.OrderReader: %w", f.Manager, errors.ErrUnsupported)
		}
		got, err = rd.Orders(ctx, ids)
		return err
	})
	return got, err
}

// UserUnits calls the wrapped Manager's UserUnits through the fault, or
// fails with errors.ErrUnsupported if it is not a stock.OrderReader.
func (f *Faulty) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	var got int64
	err := f.do(Call{Method: "UserUnits", SKUs: []string{sku}}, func() (err error) {
		rd, ok := f.Manager.(stock.OrderReader)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.OrderReader: %w", f.Manager, errors.ErrUnsupported)
		}
		got, err = rd.UserUnits(ctx, sku, userID)
		return err
	})
	return got, err
}

// HeldBefore calls the wrapped Manager's HeldBefore through the fault, or
// fails with errors.ErrUnsupported if it is not a stock.HoldLister.
func (f *Faulty) HeldBefore(ctx context.Context, t time.Time, limit int) ([]stock.OrderInfo, error) {
	var got []stock.OrderInfo
	err := f.do(Call{Method: "HeldBefore"}, func() (err error) {
		hl, ok := f.Manager.(stock.HoldLister)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.HoldLister: %w", f.Manager, errors.ErrUnsupported)
		}
		got, err = hl.HeldBefore(ctx, t, limit)
		return err
	})
	return got, err
}

// RevertHeld calls the wrapped Manager's RevertHeld through the fault (as
// a "Revert" call, see Call.Method), or fails with errors.ErrUnsupported
// if it is not a stock.HoldReverter.
func (f *Faulty) RevertHeld(ctx context.Context, orderID string) (stock.State, error) {
	var got stock.State
	err := f.do(Call{Method: "Revert", OrderID: orderID}, func() (err error) {
		hr, ok := f.Manager.(stock.HoldReverter)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.HoldReverter: %w", f.Manager, errors.ErrUnsupported)
		}
		got, err = hr.RevertHeld(ctx, orderID)
		return err
	})
	if err != nil {
		got = stock.StateUnknown
	}
	return got, err
}

// RevertItems calls the wrapped Manager's RevertItems through the fault
// (SKUs are the return's lines), or fails with errors.ErrUnsupported if it
// is not a stock.PartialReverter.
func (f *Faulty) RevertItems(ctx context.Context, r stock.Return) error {
	skus := make([]string, len(r.Items))
	for i, it := range r.Items {
		skus[i] = it.SKU
	}
	return f.do(Call{Method: "RevertItems", SKUs: skus, OrderID: r.OrderID}, func() error {
		pr, ok := f.Manager.(stock.PartialReverter)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.PartialReverter: %w", f.Manager, errors.ErrUnsupported)
		}
		return pr.RevertItems(ctx, r)
	})
}

// ExtendHold calls the wrapped Manager's ExtendHold through the fault, or
// fails with errors.ErrUnsupported if it is not a stock.HoldExtender.
func (f *Faulty) ExtendHold(ctx context.Context, orderID string, deadline time.Time) error {
	return f.do(Call{Method: "ExtendHold", OrderID: orderID}, func() error {
		hx, ok := f.Manager.(stock.HoldExtender)
		if !ok {
			return fmt.Errorf("stocktest: %T is not a stock.HoldExtender: %w", f.Manager, errors.ErrUnsupported)
		}
		return hx.ExtendHold(ctx, orderID, deadline)
	})
}

// listingChecker is a gate's check of listings (tiered.ListingChecker).
type listingChecker interface {
	CheckListing(ctx context.Context, l stock.Listing) error
	KeepsBuckets() bool
}

// CheckListing calls the wrapped Manager's CheckListing through the
// fault; a Manager without one checks only that l is valid.
func (f *Faulty) CheckListing(ctx context.Context, l stock.Listing) error {
	return f.do(Call{Method: "CheckListing", SKUs: []string{l.SKU}}, func() error {
		if c, ok := f.Manager.(listingChecker); ok {
			return c.CheckListing(ctx, l)
		}
		return l.Validate()
	})
}

// KeepsBuckets reports the wrapped Manager's KeepsBuckets (false without
// one). It has no fault: it does no I/O.
func (f *Faulty) KeepsBuckets() bool {
	c, ok := f.Manager.(listingChecker)
	return ok && c.KeepsBuckets()
}

// Narrow returns f as a stock.Manager that implements stock.Reclaimer,
// stock.OrderReader and stock.HoldLister exactly when the wrapped Manager
// does, for code that checks those interfaces with a type assertion, and
// stock.HoldReverter too when the wrapped Manager implements all four, and
// stock.PartialReverter and stock.HoldExtender when it implements all six.
// Its calls go through f.
func (f *Faulty) Narrow() stock.Manager {
	_, rc := f.Manager.(stock.Reclaimer)
	_, rd := f.Manager.(stock.OrderReader)
	_, hl := f.Manager.(stock.HoldLister)
	_, hr := f.Manager.(stock.HoldReverter)
	_, pr := f.Manager.(stock.PartialReverter)
	_, hx := f.Manager.(stock.HoldExtender)
	switch {
	case rc && rd && hl && hr && pr && hx:
		return struct {
			stock.Manager
			stock.Reclaimer
			stock.OrderReader
			stock.HoldLister
			stock.HoldReverter
			stock.PartialReverter
			stock.HoldExtender
		}{f, f, f, f, f, f, f}
	case rc && rd && hl && hr:
		return struct {
			stock.Manager
			stock.Reclaimer
			stock.OrderReader
			stock.HoldLister
			stock.HoldReverter
		}{f, f, f, f, f}
	case rc && rd && hl:
		return struct {
			stock.Manager
			stock.Reclaimer
			stock.OrderReader
			stock.HoldLister
		}{f, f, f, f}
	case rc && rd:
		return struct {
			stock.Manager
			stock.Reclaimer
			stock.OrderReader
		}{f, f, f}
	case rc && hl:
		return struct {
			stock.Manager
			stock.Reclaimer
			stock.HoldLister
		}{f, f, f}
	case rd && hl:
		return struct {
			stock.Manager
			stock.OrderReader
			stock.HoldLister
		}{f, f, f}
	case rc:
		return struct {
			stock.Manager
			stock.Reclaimer
		}{f, f}
	case rd:
		return struct {
			stock.Manager
			stock.OrderReader
		}{f, f}
	case hl:
		return struct {
			stock.Manager
			stock.HoldLister
		}{f, f}
	}
	return struct{ stock.Manager }{f}
}
