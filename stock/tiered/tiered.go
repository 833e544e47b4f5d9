package tiered

import (
	"context"
	"errors"

	"github.com/stockguard/stockguard/stock"
)

// Recorder hands an order held at the gate to the application's own queue.
// The queue's consumer must later call [Manager.Settle] with the same order
// (at least once; Settle is idempotent).
//
// Record returns nil once the order is queued. An error means it may not
// be: Deduct returns the error and leaves the gate hold in place, so the
// caller may retry the Deduct (the same order ID takes nothing twice) or
// Revert it; if neither happens the gate's reclaimer returns the hold. A
// message that was queued after all is harmless: Settle of an order whose
// gate hold is gone records nothing.
type Recorder interface {
	Record(ctx context.Context, o stock.Order) error
}

// RecorderFunc adapts a function to a Recorder.
type RecorderFunc func(ctx context.Context, o stock.Order) error

// Record calls f.
func (f RecorderFunc) Record(ctx context.Context, o stock.Order) error { return f(ctx, o) }

// Placement says where an order stands after a successful Place.
type Placement int

const (
	// Recorded: the gate holds the order and the record has it.
	Recorded Placement = iota
	// Pending: the gate holds the order and it was handed to the Recorder;
	// the record has it once Settle returns nil for it.
	Pending
)

func (p Placement) String() string {
	if p == Pending {
		return "pending"
	}
	return "recorded"
}

// Tier names one of the two tiers in errors and drift reports.
type Tier string

// The two tiers.
const (
	Gate   Tier = "gate"
	Record Tier = "record"
)

// TierError is an infrastructure failure at one tier after the other tier
// was already written. Calling the same method again (with the same order)
// is safe and finishes the job, except for Restock (see Manager.Restock).
type TierError struct {
	Tier Tier
	Op   string
	Err  error
}

func (e *TierError) Error() string {
	return "tiered: " + e.Op + " at the " + string(e.Tier) + ": " + e.Err.Error()
}

// Unwrap returns the tier's error.
func (e *TierError) Unwrap() error { return e.Err }

// Drift is a disagreement between the tiers about one order that the
// Manager leaves for reconciliation to repair.
type Drift struct {
	OrderID string
	// Tier is the tier whose answer disagreed with the other's.
	Tier Tier
	// Op is the call during which it was seen.
	Op string
	// Err is what Tier answered.
	Err error
}

// Config configures a Manager. The zero value means a synchronous hand-off
// and no drift reports.
type Config struct {
	// Recorder, if set, makes the hand-off asynchronous: Deduct queues the
	// order through it and returns once the gate holds it. Nil means
	// synchronous: Deduct records the order before it returns.
	Recorder Recorder
	// OnDrift, if set, is called (synchronously, so keep it short) when the
	// tiers disagree about an order in a way only reconciliation repairs,
	// e.g. the record confirmed a sale whose gate hold had already expired.
	OnDrift func(Drift)
}

// Manager is a stock.Manager and stock.Reclaimer over a gate and a record.
// It is safe for concurrent use and keeps no state besides its two tiers.
type Manager struct {
	gate, record stock.Manager
	cfg          Config
}

var (
	_ stock.Manager   = (*Manager)(nil)
	_ stock.Reclaimer = (*Manager)(nil)
)

// New returns a Manager that admits orders at gate and records them in
// record. Both should implement stock.Reclaimer; ReclaimExpired skips a
// tier that does not.
func New(gate, record stock.Manager, cfg Config) *Manager {
	return &Manager{gate: gate, record: record, cfg: cfg}
}

// Gate returns the gate tier.
func (m *Manager) Gate() stock.Manager { return m.gate }

// Record returns the record tier.
func (m *Manager) Record() stock.Manager { return m.record }

// Deduct places the order at the gate and hands it to the record: see
// Place. It returns nil when the gate holds the order and it is recorded
// (synchronous hand-off) or queued (with a Recorder).
func (m *Manager) Deduct(ctx context.Context, o stock.Order) error {
	_, err := m.Place(ctx, o)
	return err
}

// Place is Deduct that also says where the order stands: [Recorded] with
// the synchronous hand-off, [Pending] when a Recorder queued it. On error
// the order is not recorded by this call; a business error means it was
// refused for good and holds nothing at the gate.
func (m *Manager) Place(ctx context.Context, o stock.Order) (Placement, error) {
	if m.cfg.Recorder == nil {
		return Recorded, m.Settle(ctx, o)
	}
	if err := o.Validate(); err != nil {
		return Pending, err
	}
	if err := m.gate.Deduct(ctx, o); err != nil {
		return Pending, err
	}
	if err := m.cfg.Recorder.Record(ctx, o); err != nil {
		return Pending, &TierError{Tier: Record, Op: "hand-off", Err: err}
	}
	return Pending, nil
}

// Settle records an order the gate holds. The consumer of the Recorder's
// queue calls it; the synchronous hand-off runs the same steps.
//
// It returns nil once the record has the order (again: it is idempotent).
// A business error from the gate (the hold expired or was reverted) means
// nothing was recorded; a business error from the record (sold out there,
// conflict, limit) means the record refused it for good and the gate hold
// was reverted. Any other error leaves both tiers as they were or with the
// order half-way, and Settle may be called again.
func (m *Manager) Settle(ctx context.Context, o stock.Order) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := m.gate.Deduct(ctx, o); err != nil {
		return err
	}
	if err := m.record.Deduct(ctx, o); err != nil {
		if !stock.IsBusiness(err) {
			return &TierError{Tier: Record, Op: "deduct", Err: err}
		}
		if rerr := m.gate.Revert(ctx, o.ID); rerr != nil && !errors.Is(rerr, stock.ErrUnknownOrder) {
			// The refusal stands; the gate hold expires if nobody retries.
			return errors.Join(err, &TierError{Tier: Gate, Op: "revert after the record refused", Err: rerr})
		}
		return err
	}
	// The recheck: a Revert may have closed the order at the gate while
	// the record was being written. A hold that expired meanwhile did take
	// effect: the record's own deadline (a little later) or a late Confirm
	// returns it there.
	if err := m.gate.Deduct(ctx, o); err != nil {
		if errors.Is(err, stock.ErrHoldExpired) {
			return nil
		}
		if !stock.IsBusiness(err) {
			return &TierError{Tier: Gate, Op: "recheck", Err: err}
		}
		if rerr := m.record.Revert(ctx, o.ID); rerr != nil && !errors.Is(rerr, stock.ErrUnknownOrder) {
			return errors.Join(err, &TierError{Tier: Record, Op: "revert after the gate closed", Err: rerr})
		}
		return err
	}
	return nil
}

// PutOnSale puts the SKU on sale at the record, then at the gate. It is
// idempotent: after a *TierError naming the gate, call it again.
func (m *Manager) PutOnSale(ctx context.Context, l stock.Listing) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := m.record.PutOnSale(ctx, l); err != nil {
		return err
	}
	if err := m.gate.PutOnSale(ctx, l); err != nil {
		return &TierError{Tier: Gate, Op: "put on sale", Err: err}
	}
	return nil
}

// Restock adds units at the record, then at the gate. Restock is not
// idempotent: a *TierError naming the gate means the record has the units
// and the gate does not; do not call Restock again, restock the gate alone
// (m.Gate().Restock) or let reconciliation repair it.
func (m *Manager) Restock(ctx context.Context, sku string, units int64) error {
	if err := stock.ValidateID("sku", sku); err != nil {
		return err
	}
	if err := stock.ValidateQty("units", units, stock.MaxUnits); err != nil {
		return err
	}
	if err := m.record.Restock(ctx, sku, units); err != nil {
		return err
	}
	if err := m.gate.Restock(ctx, sku, units); err != nil {
		return &TierError{Tier: Gate, Op: "restock", Err: err}
	}
	return nil
}

// Available returns the gate's available units (the fast path).
func (m *Manager) Available(ctx context.Context, sku string) (int64, error) {
	return m.gate.Available(ctx, sku)
}

// Levels returns the gate's levels. Ask Record() for the record's.
func (m *Manager) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	return m.gate.Levels(ctx, sku)
}

func (m *Manager) drift(d Drift) {
	if m.cfg.OnDrift != nil {
		m.cfg.OnDrift(d)
	}
}
