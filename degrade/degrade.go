package degrade

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Manager is a stock.Manager that sends calls to a primary while it works
// and to a rate-limited fallback while it does not. It also implements
// stock.Reclaimer. It is safe for concurrent use; call Close when done.
type Manager struct {
	primary, fallback stock.Manager
	cfg               Config
	obs               *observe.Observer // &cfg.Observer

	mode  atomic.Int32
	epoch atomic.Uint64 // bumped when ForceFallback ends

	global   *circuit                     // PerSKU == 0: the only one
	ids      *circuit                     // Confirm and Revert
	circuits *lru.Cache[string, *circuit] // PerSKU > 0
	orders   *lru.Cache[string, tier]     // who took an order, as far as this node knows
	limiter  *rate.Limiter

	events  chan Event
	dropped atomic.Uint64
	quit    chan struct{}
	closing sync.Once
	bg      sync.WaitGroup // recalibrations and the event goroutine
}

// tier is what this node remembers about an order.
type tier byte

const (
	atPrimary  tier = iota + 1 // taken there, or the outcome there is unknown
	atFallback                 // taken by the fallback
)

var (
	_ stock.Manager   = (*Manager)(nil)
	_ stock.Reclaimer = (*Manager)(nil)
)

// New returns a Manager over primary and fallback. The fallback must see the
// primary's orders (it should be the primary's record, e.g. the SQL backend
// that a tiered primary records into): a fallback that does not would sell
// again the units the primary sold.
func New(primary, fallback stock.Manager, cfg Config) *Manager {
	cfg = cfg.withDefaults()
	d := &Manager{
		primary: primary, fallback: fallback, cfg: cfg,
		limiter: rate.NewLimiter(cfg.FallbackLimit, cfg.FallbackBurst),
		events:  make(chan Event, cfg.EventBuffer),
		quit:    make(chan struct{}),
	}
	d.obs = &d.cfg.Observer
	d.orders, _ = lru.New[string, tier](cfg.Orders)
	if cfg.PerSKU > 0 {
		d.circuits, _ = lru.New[string, *circuit](cfg.PerSKU)
		d.ids = newCircuit(d, "")
	} else {
		d.global = newCircuit(d, "")
		d.ids = d.global
	}
	if cfg.OnStateChange != nil {
		d.bg.Add(1)
		go d.deliver()
	}
	return d
}

// Close stops the event goroutine and waits for running recalibrations.
// The Manager must not be used afterwards.
func (d *Manager) Close() {
	d.closing.Do(func() { close(d.quit) })
	d.bg.Wait()
}

// SetMode sets the operator's switch. Leaving ForceFallback makes every
// breaker recalibrate and ramp back as after an outage.
func (d *Manager) SetMode(m Mode) {
	if Mode(d.mode.Swap(int32(m))) == ForceFallback && m != ForceFallback {
		d.epoch.Add(1)
	}
}

// Mode returns the operator's switch.
func (d *Manager) Mode() Mode { return Mode(d.mode.Load()) }

// State returns the state of the breaker for sku (any SKU with one global
// breaker; "" for the breaker of Confirm and Revert).
func (d *Manager) State(sku string) State {
	if sku == "" {
		return d.ids.current()
	}
	return d.circuit(sku).current()
}

// Dropped returns how many events were dropped because OnStateChange fell
// behind.
func (d *Manager) Dropped() uint64 { return d.dropped.Load() }

func (d *Manager) emit(e Event) {
	if d.cfg.OnStateChange == nil {
		return
	}
	select {
	case d.events <- e:
	default:
		d.dropped.Add(1)
	}
}

func (d *Manager) deliver() {
	defer d.bg.Done()
	for {
		select {
		case e := <-d.events:
			d.cfg.OnStateChange(e)
		case <-d.quit:
			return
		}
	}
}

func (d *Manager) circuit(sku string) *circuit {
	if d.global != nil {
		return d.global
	}
	if c, ok := d.circuits.Get(sku); ok {
		return c
	}
	c := newCircuit(d, sku)
	if prev, ok, _ := d.circuits.PeekOrAdd(sku, c); ok {
		return prev
	}
	return c
}

// route decides where a call about skus goes. dones report the primary's
// outcome to every breaker that admitted it.
type route struct {
	primary bool
	dones   []func(error)
}

func (d *Manager) route(share bool, skus ...string) route {
	switch d.Mode() {
	case ForcePrimary:
		return route{primary: true}
	case ForceFallback:
		return route{}
	}
	var r route
	seen := map[*circuit]bool{}
	for _, s := range skus {
		c := d.ids
		if s != "" {
			c = d.circuit(s)
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		ok, done := c.admit(share)
		if !ok {
			r.skip()
			return route{}
		}
		r.dones = append(r.dones, done)
	}
	r.primary = true
	return r
}

// skip tells the breakers that admitted the call that it was not made.
func (r route) skip() {
	for _, done := range r.dones {
		done(errSkip)
	}
}

// finish reports the primary's outcome; the caller's own cancellation is
// not the primary's failure.
func (r route) finish(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil && stock.IsCanceled(err) {
		err = errSkip
	}
	for _, done := range r.dones {
		done(err)
	}
}

func skusOf(items []stock.Item) []string {
	out := make([]string, len(items))
	for i, it := range canon.Sorted(items) {
		out[i] = it.SKU
	}
	return out
}

// unknown wraps a primary failure whose outcome is unknown.
func unknown(err error) error { return &unknownError{err} }

// unknownError is a primary failure whose outcome is unknown. It matches
// stock.ErrUnknownOutcome and, through Is and As, what err wraps, except
// the errors that say nothing was applied (stock.ErrContention,
// stock.ErrUnavailable): the order may have been taken by an earlier
// attempt.
type unknownError struct{ err error }

func (e *unknownError) Error() string {
	return "degrade: primary: " + stock.ErrUnknownOutcome.Error() + ": " + e.err.Error()
}

func (e *unknownError) Is(target error) bool {
	switch target {
	case stock.ErrUnknownOutcome:
		return true
	case stock.ErrContention, stock.ErrUnavailable:
		return false
	}
	return errors.Is(e.err, target)
}

func (e *unknownError) As(target any) bool { return errors.As(e.err, target) }

// nothingApplied reports whether a primary error says, by the outcome rule
// every backend keeps, that the call applied nothing: a context already
// done before it was sent, stock.ErrContention or stock.ErrUnavailable
// (and not stock.ErrUnknownOutcome).
func nothingApplied(err error) bool {
	if errors.Is(err, stock.ErrUnknownOutcome) {
		return false
	}
	return errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnavailable)
}

// Deduct places the order on the primary while its breakers let it, on the
// fallback (within its rate limit, else ErrBusy) while they do not.
//
// An order whose outcome on the primary is unknown (an infrastructure
// error after the request may have been sent) never goes to the fallback:
// it is re-deducted once on the primary at once (idempotent, so it tells
// whether the order holds its units) and, if that fails too, the error
// matches stock.ErrUnknownOutcome (and never stock.ErrUnavailable or
// stock.ErrContention with it). This node remembers such orders, and
// those the primary took, and sends their retries to the primary only.
// Orders it remembers the fallback took go back to the fallback.
//
// A primary answer that says nothing was applied (stock.ErrUnavailable,
// stock.ErrContention) is returned as it is: it counts as a failure for
// the breaker, and the caller retries. A context that is done before the
// call gets its own error, and nothing is sent anywhere.
func (d *Manager) Deduct(ctx context.Context, o stock.Order) (err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	known, _ := d.orders.Get(o.ID)
	r := d.route(true, skusOf(o.Items)...)
	switch {
	case r.primary && known != atFallback:
		err := d.primary.Deduct(ctx, o)
		r.finish(ctx, err)
		if err == nil || stock.IsBusiness(err) {
			if err == nil {
				d.orders.Add(o.ID, atPrimary)
			}
			return err
		}
		if nothingApplied(err) {
			return err
		}
		d.orders.Add(o.ID, atPrimary)
		return d.resolve(ctx, o, err)
	case r.primary:
		r.skip()
		return d.fallbackDeduct(ctx, o)
	case known == atPrimary:
		return d.resolve(ctx, o, ErrPrimaryDown)
	case known == atFallback:
		return d.fallbackDeduct(ctx, o) // a retry: it takes nothing more
	}
	if !d.limiter.AllowN(d.cfg.Clock.Now(), 1) {
		return ErrBusy
	}
	err = d.fallbackDeduct(ctx, o)
	if err == nil {
		d.orders.Add(o.ID, atFallback)
	}
	return err
}

// fallbackDeduct places the order on the fallback. An order with its own
// hold time is given the hold time the primary would give its record
// (stock/tiered's Manager.RecordOrder), so that its deadline there is the
// one the primary reads back as a gate deadline plus the grace.
func (d *Manager) fallbackDeduct(ctx context.Context, o stock.Order) error {
	if ro, ok := d.primary.(recordOrderer); ok && o.HoldTTL != 0 {
		var err error
		if o, err = ro.RecordOrder(ctx, o); err != nil {
			return err
		}
	}
	return d.fallback.Deduct(ctx, o)
}

// resolve re-deducts an order whose primary outcome is unknown, once,
// bypassing the breakers (it is the same order, not new traffic).
func (d *Manager) resolve(ctx context.Context, o stock.Order, cause error) error {
	if ctx.Err() != nil {
		return unknown(errors.Join(cause, ctx.Err()))
	}
	err := d.primary.Deduct(ctx, o)
	if err == nil || stock.IsBusiness(err) {
		return err
	}
	return unknown(err)
}
