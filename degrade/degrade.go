package degrade

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Manager is a stock.Manager that sends calls to a primary while it works
// and to a rate-limited fallback while it does not. It also implements
// stock.Reclaimer. It is safe for concurrent use; call Close when done.
type Manager struct {
	primary, fallback stock.Manager
	// shared: the fallback is the primary's own record path (a tiered
	// flow's Fallback), so an order ID is idempotent across the two.
	shared bool
	cfg    Config
	obs    *observe.Observer // &cfg.Observer

	mode  atomic.Int32
	epoch atomic.Uint64 // bumped when ForceFallback ends

	global  *circuit                 // PerSKU == 0: the only one
	ids     *circuit                 // Confirm and Revert
	set     *breakers                // PerSKU > 0
	orders  *lru.Cache[string, tier] // who took an order, as far as this node knows
	limiter *rate.Limiter

	events  chan Event
	dropped atomic.Uint64
	quit    chan struct{}
	// life ends with Close, and with it any recalibration running.
	life    context.Context
	end     context.CancelFunc
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

// New returns a Manager over primary and fallback.
//
// With a stock/tiered flow as the primary, pass nil as the fallback: the
// Manager takes the flow's record path (tiered.Manager.Fallback), which
// writes the flow's own record with the flow's hold times and decides by
// the gate's deadlines, so an order ID is idempotent across the two paths
// and an order whose outcome at the flow is unknown can be settled at the
// record while the gate is down. A fallback given with a flow must be that
// flow's Fallback (or a wrapper forwarding its Flow method); any other is
// refused with an error wrapping stock.ErrInvalid, as is a ramp step
// outside (0, 1) (Config.RampSteps) and a FallbackLimit that is NaN.
//
// With any other primary the fallback must see the primary's orders: a
// fallback that does not would sell the same units twice.
func New(primary, fallback stock.Manager, cfg Config) (*Manager, error) {
	if primary == nil {
		return nil, &stock.InvalidError{Field: "degrade.New primary", Reason: "nil"}
	}
	shared := false
	if fl, ok := primary.(flow); ok {
		path := fl.Fallback()
		if fallback == nil {
			fallback = path
		}
		if fb, ok := fallback.(flowPart); !ok || fb.Flow() != path.Flow() {
			return nil, &stock.InvalidError{Field: "degrade.New fallback",
				Reason: "the primary is a stock/tiered flow: pass nil (or its Fallback()) as the fallback, the record path that keeps the flow's hold times and deadlines"}
		}
		shared = true
	} else if fallback == nil {
		return nil, &stock.InvalidError{Field: "degrade.New fallback", Reason: "nil, and the primary is not a stock/tiered flow"}
	}
	for i, p := range cfg.RampSteps {
		if !(p > 0 && p < 1) { // NaN too
			return nil, &stock.InvalidError{Field: fmt.Sprintf("degrade.Config.RampSteps[%d]", i),
				Reason: fmt.Sprintf("%v is not in (0, 1): a step sends that share of orders to the primary, and moves on only once the primary answered one", p)}
		}
	}
	if math.IsNaN(float64(cfg.FallbackLimit)) {
		return nil, &stock.InvalidError{Field: "degrade.Config.FallbackLimit",
			Reason: "NaN is not a rate: the fallback's token bucket would admit every call"}
	}
	cfg = cfg.withDefaults()
	d := &Manager{
		primary: primary, fallback: fallback, shared: shared, cfg: cfg,
		limiter: rate.NewLimiter(cfg.FallbackLimit, cfg.FallbackBurst),
		events:  make(chan Event, cfg.EventBuffer),
		quit:    make(chan struct{}),
	}
	d.life, d.end = context.WithCancel(context.Background())
	d.obs = &d.cfg.Observer
	d.orders, _ = lru.New[string, tier](cfg.Orders)
	if cfg.PerSKU > 0 {
		d.set = newBreakers(cfg.PerSKU)
		d.ids = newCircuit(d, "")
	} else {
		d.global = newCircuit(d, "")
		d.ids = d.global
	}
	d.ids.made()
	if cfg.OnStateChange != nil {
		d.bg.Add(1)
		go d.deliver()
	}
	return d, nil
}

// flow is a stock/tiered flow: its record path is the fallback.
type flow interface {
	Fallback() *tiered.Fallback
}

// flowPart is a tiered flow's record path, or a wrapper of one.
type flowPart interface {
	Flow() *tiered.Manager
}

// Close stops the event goroutine, cancels a running recalibration and
// waits for it to end. The Manager must not be used afterwards.
func (d *Manager) Close() {
	d.closing.Do(func() { close(d.quit); d.end() })
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
	cs, release := d.use(sku)
	defer release()
	return cs[0].current()
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

// route decides where a call about skus goes. dones report the primary's
// outcome to every breaker that admitted it.
//
// The breakers off the primary (open, or recalibrating it) are asked
// first, then the others in turn, until one does not send the call to the
// primary: a call one breaker keeps off, or leaves out of its ramping
// share, takes no share of the others'. When one is open, the call goes
// to neither tier (the fallback refuses it, see enterFallback) unless all
// are, and counts as a failure of the primary for the order's breakers
// that send every call there (closed: not ramping or recalibrating;
// errOthersOff): an order's SKUs move to the fallback together, within
// their breakers' threshold, instead of the order being refused for as
// long as the breakers disagree.
type route struct {
	primary bool
	// settling: not sent to the primary because one of the breakers is
	// recalibrating it or ramping traffic back to it. A write at the
	// fallback alone now would be missed by the recalibration, or not be
	// in the primary the recalibration brought up to date.
	settling bool
	dones    []func(error)
}

func (d *Manager) route(share bool, circuits ...*circuit) route {
	switch d.Mode() {
	case ForcePrimary:
		return route{primary: true}
	case ForceFallback:
		return route{}
	}
	var r route
	// The breakers off the primary first (open, or recalibrating it):
	// asking them counts no share, and one of them decides the call
	// before a ramping breaker gives it a share it would not use.
	admitted := map[*circuit]func(error){} // back to the primary meanwhile
	skip := func() {
		r.skip()
		for _, done := range admitted {
			done(errSkip)
		}
	}
	for i, c := range circuits {
		if !c.off() {
			continue
		}
		switch w, done := c.admit(share); w {
		case toPrimary:
			admitted[c] = done // its share is taken: not asked again
		case toFallback:
			skip()
			for j, o := range circuits {
				if j != i {
					o.failOthersOff()
				}
			}
			return route{}
		default:
			skip()
			return route{settling: true}
		}
	}
	for _, c := range circuits {
		w, done := toPrimary, admitted[c]
		if done != nil {
			delete(admitted, c)
		} else {
			w, done = c.admit(share)
		}
		if w != toPrimary {
			skip()
			return route{settling: w == settling}
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

// finish reports the primary's outcome; the caller's own cancellation, and
// a flow's refusal to admit (tiered.ErrNotAdmitted: its hand-off lags), are
// not the primary's failure.
func (r route) finish(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil && stock.IsCanceled(err) {
		err = errSkip
	}
	if errors.Is(err, tiered.ErrNotAdmitted) {
		err = errSkip // a healthy flow slowing admissions: no failure
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

// Deduct places the order: see Place.
func (d *Manager) Deduct(ctx context.Context, o stock.Order) error {
	_, err := d.Place(ctx, o)
	return err
}

// Place places the order on the primary while its breakers let it, on the
// fallback (within its rate limit, else ErrBusy) while they are open, and
// says where it stands: the primary's Placement when the primary
// implements Place (a stock/tiered flow with a Recorder may answer
// tiered.Pending), tiered.Recorded otherwise and for the fallback.
//
// The answer follows the outcome rule of package stock. A primary error
// that does not match stock.ErrUnknownOutcome applied nothing (a refused
// dial, stock.ErrUnavailable, stock.ErrContention, a context already done):
// it counts for the breaker and is returned as it is, and the order's retry
// goes wherever the breakers then send new orders (the fallback once they
// opened). An order whose outcome on the primary is unknown (an error
// after the request may have been sent) gets an error matching
// stock.ErrUnknownOutcome at once: it is not sent to the primary again
// within the call, so a call answers within the bound of one attempt on
// the primary (its client's timeouts, its record's lock waits), not two.
// This node remembers such orders, and those each tier took, and sends
// their retries to the same tier: an order in doubt goes to the primary
// while its breakers let traffic through, and a retry there that fails
// without an answer (nothing sent, the connection refused) is still an
// unknown outcome: the earlier attempt may have placed the order. A retry of an order in doubt
// while the breakers keep traffic off the primary goes to the fallback
// when it is the primary's own record path (see New): the record knows
// the order by its ID, so it is taken there at most once, and a hold the
// primary's gate may also have returns at its deadline. With any other
// fallback it is re-placed on the primary (never in ForceFallback mode:
// ErrPrimaryDown with stock.ErrUnknownOutcome).
//
// With per-SKU breakers, an order goes to the primary only if the breakers
// of all its SKUs let it, and is written at the fallback alone only if all
// of them are open. While some are open and the others send traffic to
// the primary, it gets ErrBusy, nothing written (an order in doubt at the
// primary is re-placed there, as above), and counts as the primary's
// failure for the others that are closed (not ramping), so that they open
// too within Config.ReadyToTrip and the order then goes to the fallback.
//
// Once a breaker has begun to recalibrate the primary, no new order is
// written at the fallback alone: while it recalibrates, and while it ramps
// traffic back, the orders it does not send to the primary get ErrBusy
// (nothing written), since the recalibrated primary would not know them.
// A recalibration waits for the fallback's Deducts already running.
//
// A context that is done before the call gets its own error, and nothing
// is sent anywhere.
func (d *Manager) Place(ctx context.Context, o stock.Order) (p tiered.Placement, err error) {
	ctx, tr := d.obs.Track(ctx, "degrade", observe.OpDeduct, len(o.Items))
	defer func() { err = stock.NameOrder(o.ID, err); tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return tiered.Recorded, err
	}
	if err := ctx.Err(); err != nil {
		return tiered.Recorded, err
	}
	cs, release := d.use(skusOf(o.Items)...)
	defer release()
	known, _ := d.orders.Get(o.ID)
	r := d.route(true, cs...)
	switch {
	case r.primary && known != atFallback:
		p, err := d.placePrimary(ctx, o)
		r.finish(ctx, err)
		if err == nil {
			d.orders.Add(o.ID, atPrimary)
		}
		switch {
		case err == nil || stock.IsBusiness(err):
			return p, err
		case known == atPrimary || errors.Is(err, stock.ErrUnknownOutcome):
			// In doubt now, or still: an attempt that sent nothing
			// proves nothing of an order an earlier one may have placed.
			d.orders.Add(o.ID, atPrimary)
			return p, unknown(err)
		}
		return p, err
	case r.primary:
		r.skip()
		return tiered.Recorded, d.fallback.Deduct(ctx, o) // a retry: it takes nothing more
	case known == atFallback:
		return tiered.Recorded, d.fallback.Deduct(ctx, o)
	case known == atPrimary && d.shared && !r.settling:
		// In doubt at the primary, which takes no traffic: the record
		// settles it (not rate limited: it is not new traffic). The gate
		// may hold it too, so it stays an order of the primary's: what
		// finishes it asks the gate first.
		if err, ok := d.atFallback(ctx, o, cs, false); ok {
			return tiered.Recorded, err
		}
		return d.resolve(ctx, o, ErrPrimaryDown)
	case known == atPrimary:
		if d.Mode() == ForceFallback {
			return tiered.Recorded, unknown(ErrPrimaryDown)
		}
		return d.resolve(ctx, o, ErrPrimaryDown)
	case r.settling:
		return tiered.Recorded, ErrBusy
	}
	err, ok := d.atFallback(ctx, o, cs, true)
	if !ok {
		return tiered.Recorded, ErrBusy
	}
	return tiered.Recorded, err
}

// placer is a primary that says where an order stands (stock/tiered).
type placer interface {
	Place(ctx context.Context, o stock.Order) (tiered.Placement, error)
}

func (d *Manager) placePrimary(ctx context.Context, o stock.Order) (tiered.Placement, error) {
	if pl, ok := d.primary.(placer); ok {
		return pl.Place(ctx, o)
	}
	return tiered.Recorded, d.primary.Deduct(ctx, o)
}

// atFallback places a new order (or one in doubt at the primary) on the
// fallback alone, while every breaker of its SKUs keeps traffic off the
// primary; ok is false, with nothing sent, once one of them has begun to
// recalibrate (see enterFallback). A new order takes one of the
// fallback's tokens once admitted there (ErrBusy without one), and, taken,
// is remembered as the fallback's; one in doubt at the primary does
// neither (it is not new traffic, and the primary may hold it too).
func (d *Manager) atFallback(ctx context.Context, o stock.Order, cs []*circuit, newOrder bool) (err error, ok bool) {
	leave, ok := d.enterFallback(cs)
	if !ok {
		return nil, false
	}
	defer leave()
	if newOrder && !d.limiter.AllowN(d.cfg.Clock.Now(), 1) {
		return ErrBusy, true
	}
	err = d.fallback.Deduct(ctx, o)
	if err == nil && newOrder {
		d.orders.Add(o.ID, atFallback)
	}
	return err, true
}

// enterFallback admits a write at the fallback alone under the breakers
// cs, which the caller uses (Manager.use) until the write has ended: it
// holds their fallback locks (shared, in key order) until leave is
// called, so that a recalibration starting meanwhile waits for the write
// before it reads (see runRecalibrate). It refuses once a breaker is no
// longer open (ForceFallback mode holds every breaker open): the
// recalibration may already have read. A breaker that admitted the write
// carries it (circuit.unread) until a recalibration has read it, and so
// is not dropped before.
func (d *Manager) enterFallback(cs []*circuit) (leave func(), ok bool) {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b *circuit) int { return strings.Compare(a.key, b.key) })
	for _, c := range cs {
		c.fb.RLock()
	}
	leave = func() {
		for _, c := range cs {
			c.fb.RUnlock()
		}
	}
	for _, c := range cs {
		if !c.open() {
			leave()
			return nil, false
		}
	}
	for _, c := range cs {
		c.mu.Lock()
		c.unread = true
		c.mu.Unlock()
	}
	return leave, true
}

// resolve re-places a retry of an order whose primary outcome is unknown,
// once, bypassing the breakers (it is the same order, not new traffic).
func (d *Manager) resolve(ctx context.Context, o stock.Order, cause error) (tiered.Placement, error) {
	if ctx.Err() != nil {
		return tiered.Recorded, unknown(errors.Join(cause, ctx.Err()))
	}
	p, err := d.placePrimary(ctx, o)
	if err == nil || stock.IsBusiness(err) {
		return p, err
	}
	return p, unknown(err)
}
