// Package memstock is an in-process stock.Manager: one mutex over maps. It
// keeps every promise of the contract within one process and passes the
// conformance suite, which makes it the reference the other backends are
// read against and a fake for the tests of code that uses a Manager. It is
// not shared between processes and keeps nothing on disk.
package memstock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Store is an in-memory stock.Manager, stock.Reclaimer, stock.OrderReader,
// stock.HoldLister, stock.HoldReverter, stock.PartialReverter and
// stock.HoldExtender. The zero value is
// not usable; call New. It is safe for concurrent use.
type Store struct {
	clock  stock.Clock
	mu     sync.Mutex
	skus   map[string]*sku
	orders map[string]*order
	ops    map[string]stock.Restock // restocks applied, by operation ID
	obs    *observe.Observer
}

type sku struct {
	avail, held, sold int64
	limit             int64
	hold, maxHold     time.Duration
	users             map[string]int64
}

type state byte

const (
	held state = iota
	confirmed
	reverted
	refunded
	expired
)

type order struct {
	sig      string
	user     string
	items    []stock.Item
	state    state
	deadline time.Time
	bound    time.Time         // the latest deadline ExtendHold may set
	returned map[string]int64  // units given back by RevertItems, per SKU
	returns  map[string]string // RevertItems applied, by OpID: their signature
}

// left returns what the order still takes of line it.
func (o *order) left(it stock.Item) int64 { return it.Qty - o.returned[it.SKU] }

var (
	_ stock.Manager         = (*Store)(nil)
	_ stock.Reclaimer       = (*Store)(nil)
	_ stock.OrderReader     = (*Store)(nil)
	_ stock.HoldLister      = (*Store)(nil)
	_ stock.HoldReverter    = (*Store)(nil)
	_ stock.PartialReverter = (*Store)(nil)
	_ stock.HoldExtender    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithObserver makes the Store report its calls and reclaim passes to o
// (package observe).
func WithObserver(o observe.Observer) Option {
	return func(s *Store) { s.obs = &o }
}

// New returns an empty Store reading time from clock (stock.SystemClock if
// nil).
func New(clock stock.Clock, opts ...Option) *Store {
	if clock == nil {
		clock = stock.SystemClock
	}
	s := &Store{clock: clock, skus: map[string]*sku{}, orders: map[string]*order{}, ops: map[string]stock.Restock{}, obs: &observe.Observer{}}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// CheckListing reports what PutOnSale would refuse in l, writing nothing:
// an invalid listing (a memstock gate of a tiered flow keeps no bucket
// counts).
func (s *Store) CheckListing(ctx context.Context, l stock.Listing) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.Validate()
}

// KeepsBuckets reports false: a Store keeps no bucket count per SKU.
func (s *Store) KeepsBuckets() bool { return false }

// PutOnSale implements stock.Manager.
func (s *Store) PutOnSale(ctx context.Context, l stock.Listing) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpPutOnSale, 1)
	defer func() { tr.Done(err) }()
	if err := l.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skus[l.SKU]
	if k == nil {
		k = &sku{users: map[string]int64{}}
		s.skus[l.SKU] = k
	}
	k.avail, k.limit = l.Units, l.PerUserLimit
	k.hold, k.maxHold = l.EffectiveHoldTTL().Truncate(time.Millisecond), l.EffectiveMaxHoldTTL().Truncate(time.Millisecond)
	return nil
}

// Restock implements stock.Manager. Operation IDs are remembered for the
// Store's life.
func (s *Store) Restock(ctx context.Context, r stock.Restock) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpRestock, 1)
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.ops[r.OpID]; ok {
		if prev != r {
			return stock.ErrConflict
		}
		return nil
	}
	k := s.skus[r.SKU]
	if k == nil {
		return &stock.SKUError{SKU: r.SKU, Err: stock.ErrUnknownSKU}
	}
	if k.avail+r.Units > stock.MaxUnits {
		return &stock.InvalidError{Field: "restock.Units", Reason: "restock would pass stock.MaxUnits"}
	}
	k.avail += r.Units
	s.ops[r.OpID] = r
	return nil
}

// Deduct implements stock.Manager.
func (s *Store) Deduct(ctx context.Context, o stock.Order) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpDeduct, len(o.Items))
	defer func() { tr.Done(err) }()
	if err := o.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	items := canon.Sorted(o.Items)
	sig := canon.Signature(items)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if prev := s.orders[o.ID]; prev != nil {
		switch {
		case prev.sig != sig || prev.user != o.UserID:
			return stock.ErrConflict
		case prev.state == held && !now.Before(prev.deadline):
			return stock.ErrHoldExpired // due, not reclaimed yet
		case prev.state == held || prev.state == confirmed:
			return nil
		case prev.state == expired:
			return stock.ErrHoldExpired
		default:
			return stock.ErrOrderClosed
		}
	}
	holds, maxes := make([]time.Duration, len(items)), make([]time.Duration, len(items))
	for i, it := range items {
		k := s.skus[it.SKU]
		switch {
		case k == nil:
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrUnknownSKU}
		case k.limit > 0 && o.UserID == "":
			return &stock.InvalidError{Field: "order.UserID", Reason: "SKU " + it.SKU + " has a per-user limit"}
		case k.avail < it.Qty:
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrSoldOut}
		case k.limit > 0 && k.users[o.UserID]+it.Qty > k.limit:
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrLimitReached}
		}
		holds[i], maxes[i] = k.hold, k.maxHold
	}
	hold, bound, bad := canon.Hold(o.HoldTTL, holds, maxes)
	if bad >= 0 {
		return &stock.SKUError{SKU: items[bad].SKU, Err: stock.ErrHoldTooLong}
	}
	for _, it := range items {
		k := s.skus[it.SKU]
		k.avail -= it.Qty
		k.held += it.Qty
		if o.UserID != "" {
			k.users[o.UserID] += it.Qty
		}
	}
	now = ms(now)
	s.orders[o.ID] = &order{sig: sig, user: o.UserID, items: items, deadline: now.Add(hold), bound: now.Add(bound)}
	return nil
}

// lock validates id and ctx, then takes the Store's lock; on error the
// lock is not held.
func (s *Store) lock(ctx context.Context, field, id string) error {
	if err := stock.ValidateID(field, id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	return nil
}

// Confirm implements stock.Manager.
func (s *Store) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpConfirm, 0)
	defer func() { tr.Done(err) }()
	if err := s.lock(ctx, "orderID", orderID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	o := s.orders[orderID]
	if o == nil {
		return stock.ErrUnknownOrder
	}
	switch o.state {
	case confirmed:
		return nil
	case expired:
		return stock.ErrHoldExpired
	case reverted, refunded:
		return stock.ErrOrderClosed
	}
	if !s.clock.Now().Before(o.deadline) {
		s.release(o, expired)
		return stock.ErrHoldExpired
	}
	for _, it := range o.items {
		k := s.skus[it.SKU]
		k.held -= o.left(it)
		k.sold += o.left(it)
	}
	o.state = confirmed
	return nil
}

// Revert implements stock.Manager.
func (s *Store) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := s.lock(ctx, "orderID", orderID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	o := s.orders[orderID]
	switch {
	case o == nil:
		return stock.ErrUnknownOrder
	case o.state == held && !s.clock.Now().Before(o.deadline):
		s.release(o, expired) // expired, reclaimed or not: as the reclaimer ends it
	case o.state == held:
		s.release(o, reverted)
	case o.state == confirmed:
		s.release(o, refunded)
	}
	return nil
}

// RevertHeld implements stock.HoldReverter.
func (s *Store) RevertHeld(ctx context.Context, orderID string) (found stock.State, err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	if err := s.lock(ctx, "orderID", orderID); err != nil {
		return stock.StateUnknown, err
	}
	defer s.mu.Unlock()
	o := s.orders[orderID]
	if o == nil {
		return stock.StateUnknown, nil
	}
	found = stateOf[o.state]
	if o.state == held {
		s.release(o, expired)
	}
	return found, nil
}

// release returns the units and quota of a held or confirmed order (what
// partial reverts left of it).
func (s *Store) release(o *order, to state) {
	for _, it := range o.items {
		s.give(o, stock.Item{SKU: it.SKU, Qty: o.left(it)})
	}
	o.state = to
}

// give returns it.Qty units of a held or confirmed order's line, and the
// quota for them.
func (s *Store) give(o *order, it stock.Item) {
	k := s.skus[it.SKU]
	if o.state == held {
		k.held -= it.Qty
	} else {
		k.sold -= it.Qty
	}
	k.avail += it.Qty
	if o.user != "" {
		k.users[o.user] -= it.Qty
	}
}

// RevertItems implements stock.PartialReverter. Operation IDs are
// remembered for the Store's life.
func (s *Store) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpRevertItems, len(r.Items))
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	items := canon.Sorted(r.Items)
	sig := canon.Signature(items)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orders[r.OrderID]
	if o == nil {
		return stock.ErrUnknownOrder
	}
	if prev, ok := o.returns[r.OpID]; ok {
		if prev != sig {
			return stock.ErrConflict
		}
		return nil
	}
	switch {
	case o.state == expired || (o.state == held && !s.clock.Now().Before(o.deadline)):
		return stock.ErrHoldExpired
	case o.state == reverted || o.state == refunded:
		return stock.ErrOrderClosed
	}
	for _, it := range items {
		i := slices.IndexFunc(o.items, func(l stock.Item) bool { return l.SKU == it.SKU })
		if i < 0 || it.Qty > o.left(o.items[i]) {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrExceedsOrder}
		}
	}
	if o.returned == nil {
		o.returned, o.returns = map[string]int64{}, map[string]string{}
	}
	for _, it := range items {
		s.give(o, it)
		o.returned[it.SKU] += it.Qty
	}
	o.returns[r.OpID] = sig
	for _, it := range o.items {
		if o.left(it) > 0 {
			return nil
		}
	}
	if o.state == held {
		o.state = reverted
	} else {
		o.state = refunded
	}
	return nil
}

// ExtendHold implements stock.HoldExtender.
func (s *Store) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpExtendHold, 0)
	defer func() { tr.Done(err) }()
	if err := s.lock(ctx, "orderID", orderID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	o := s.orders[orderID]
	switch {
	case o == nil:
		return stock.ErrUnknownOrder
	case o.state == confirmed:
		return stock.ErrOrderConfirmed
	case o.state == reverted || o.state == refunded:
		return stock.ErrOrderClosed
	case o.state == expired || !s.clock.Now().Before(o.deadline):
		return stock.ErrHoldExpired
	}
	deadline = ms(deadline)
	switch {
	case !deadline.After(o.deadline):
		return nil
	case deadline.After(o.bound):
		return stock.ErrHoldTooLong
	}
	o.deadline = deadline
	return nil
}

// ms truncates t to the millisecond, as the other backends keep deadlines.
func ms(t time.Time) time.Time { return time.UnixMilli(canon.Millis(t)).In(t.Location()) }

// Available implements stock.Manager.
func (s *Store) Available(ctx context.Context, skuID string) (int64, error) {
	lv, err := s.Levels(ctx, skuID)
	return lv.Available, err
}

// Levels implements stock.Manager.
func (s *Store) Levels(ctx context.Context, skuID string) (stock.Levels, error) {
	if err := s.lock(ctx, "sku", skuID); err != nil {
		return stock.Levels{}, err
	}
	defer s.mu.Unlock()
	k := s.skus[skuID]
	if k == nil {
		return stock.Levels{}, &stock.SKUError{SKU: skuID, Err: stock.ErrUnknownSKU}
	}
	return stock.Levels{Available: k.avail, Held: k.held, Sold: k.sold, PerUserLimit: k.limit,
		HoldTTL: k.hold, MaxHoldTTL: k.maxHold}, nil
}

// Orders implements stock.OrderReader.
func (s *Store) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	for _, id := range ids {
		if err := stock.ValidateID("orderID", id); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]stock.OrderInfo, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if o := s.orders[id]; o != nil {
			out[i] = stock.OrderInfo{ID: id, UserID: o.user, Items: slices.Clone(o.items),
				State: stateOf[o.state], Deadline: o.deadline, Returned: canon.Returned(o.returned)}
		}
	}
	return out, nil
}

// UserUnits implements stock.OrderReader.
func (s *Store) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	if err := validUser(sku, userID); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.skus[sku]
	if k == nil {
		return 0, &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	}
	return k.users[userID], nil
}

// validUser checks UserUnits' arguments.
func validUser(sku, userID string) error {
	if err := stock.ValidateID("sku", sku); err != nil {
		return err
	}
	return stock.ValidateID("userID", userID)
}

// HeldBefore implements stock.HoldLister.
func (s *Store) HeldBefore(ctx context.Context, t time.Time, limit int) ([]stock.OrderInfo, error) {
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stock.OrderInfo
	for id, o := range s.orders {
		if o.state == held && !o.deadline.After(t) {
			out = append(out, stock.OrderInfo{ID: id, UserID: o.user, Items: slices.Clone(o.items),
				State: stock.StateHeld, Deadline: o.deadline, Returned: canon.Returned(o.returned)})
		}
	}
	slices.SortFunc(out, func(a, b stock.OrderInfo) int {
		if c := a.Deadline.Compare(b.Deadline); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

var stateOf = [...]stock.State{
	held: stock.StateHeld, confirmed: stock.StateConfirmed, reverted: stock.StateReverted,
	refunded: stock.StateRefunded, expired: stock.StateExpired,
}

// ReclaimExpired implements stock.Reclaimer. It scans every order, so its
// cost grows with the orders kept, not with the due ones: fine for tests and
// small shops, which is what this backend is for. An order's lines are
// returned together: the result may hold more than limit lines when the
// last order has lines beyond the limit.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) (out []stock.Reclaimed, err error) {
	ctx, tr := s.obs.Track(ctx, "memstock", observe.OpReclaim, 0)
	defer func() { tr.Done(err) }()
	var start, oldest, now time.Time
	if s.obs.Reclaiming() {
		start = time.Now()
		defer func() { s.obs.PassDone(ctx, "memstock", start, out, oldest, now, err) }()
	}
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.clock.Now()
	for id, o := range s.orders {
		if len(out) >= limit {
			break
		}
		if o.state != held || now.Before(o.deadline) {
			continue
		}
		if oldest.IsZero() || o.deadline.Before(oldest) {
			oldest = o.deadline
		}
		for _, it := range o.items {
			if n := o.left(it); n > 0 {
				out = append(out, stock.Reclaimed{OrderID: id, UserID: o.user, SKU: it.SKU, Qty: n})
			}
		}
		s.release(o, expired)
	}
	return out, nil
}
