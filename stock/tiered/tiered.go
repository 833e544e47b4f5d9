package tiered

import (
	"context"
	"errors"
	"time"

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
	// SKUs are the SKUs of the order's lines when the call knew them (the
	// reclaimer does; Confirm does not): the SKUs to reconcile.
	SKUs []string
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
	// RecordGrace is how much longer a hold lasts at the record than at the
	// gate: PutOnSale gives the record the listing's hold time plus
	// RecordGrace (at most stock.MaxHoldTTL). The gate decides when a hold
	// ends and ReclaimExpired returns the record's copy with it; the
	// record's own, later deadline only returns copies that a crash left
	// behind. It must exceed the reclaimer's interval plus the clock skew
	// between nodes. Zero means the hold time itself (the record holds
	// twice as long as the gate).
	RecordGrace time.Duration
	// RecheckAfter is how long Settle waits before asking the record once
	// more when it refuses an order as sold out or over the per-user limit,
	// before the refusal stands (see ReclaimExpired: a unit the gate has
	// just returned may still be held at the record for a few round
	// trips). Zero means 25ms; negative means no second ask. In a healthy
	// flow the record refuses nothing the gate admitted, so the wait is
	// paid only in that window or when the tiers have drifted.
	RecheckAfter time.Duration
}

const defaultRecheckAfter = 25 * time.Millisecond

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
// the order is not recorded: a copy the record took meanwhile is reverted.
// A business error from the record (sold out there, conflict, limit) means
// the record refused it for good and the gate hold was reverted. Any other
// error leaves both tiers as they were or with the order half-way, and
// Settle may be called again.
func (m *Manager) Settle(ctx context.Context, o stock.Order) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := m.gate.Deduct(ctx, o); err != nil {
		if ended(err) {
			// The hold ended at the gate. An earlier Settle of the same
			// order may have written the record and stopped before its
			// recheck: return that copy too.
			if rerr := m.returnCopy(ctx, o.ID); rerr != nil {
				return rerr
			}
		}
		return err
	}
	if err := m.recordDeduct(ctx, o); err != nil {
		if !stock.IsBusiness(err) {
			return &TierError{Tier: Record, Op: "deduct", Err: err}
		}
		if rerr := m.gate.Revert(ctx, o.ID); rerr != nil && !errors.Is(rerr, stock.ErrUnknownOrder) {
			// The refusal stands; the gate hold expires if nobody retries.
			return errors.Join(err, &TierError{Tier: Gate, Op: "revert after the record refused", Err: rerr})
		}
		return err
	}
	// The recheck: while the record was being written, a Revert may have
	// closed the order at the gate, or the gate's reclaimer may have
	// returned the hold (and found nothing to revert at the record yet).
	// Either way the gate decided and the record's copy goes too. A hold
	// that expired did exist: Settle returns nil, as if it had expired a
	// moment after (a Confirm now gets stock.ErrHoldExpired).
	if err := m.gate.Deduct(ctx, o); err != nil {
		if !stock.IsBusiness(err) {
			return &TierError{Tier: Gate, Op: "recheck", Err: err}
		}
		if !ended(err) {
			return err
		}
		if rerr := m.revertRecord(ctx, o.ID); rerr != nil {
			return rerr
		}
		if errors.Is(err, stock.ErrHoldExpired) {
			return nil
		}
		return err
	}
	return nil
}

// recordDeduct writes the order to the record. A refusal for want of units
// or quota (sold out, limit) is asked again once after Config.RecheckAfter:
// the gate may have sold a unit whose previous hold it returned a moment
// ago, and the reclaimer reverts the record's copy of that hold right
// after the gate returns it, so the unit may still be on its way back.
func (m *Manager) recordDeduct(ctx context.Context, o stock.Order) error {
	err := m.record.Deduct(ctx, o)
	if !errors.Is(err, stock.ErrSoldOut) && !errors.Is(err, stock.ErrLimitReached) {
		return err
	}
	wait := m.cfg.RecheckAfter
	if wait < 0 {
		return err
	}
	if wait == 0 {
		wait = defaultRecheckAfter
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return err
	case <-t.C:
	}
	return m.record.Deduct(ctx, o)
}

// ended reports whether a gate answer means the order's hold is over there:
// expired, or closed by a Revert.
func ended(err error) bool {
	return errors.Is(err, stock.ErrHoldExpired) || errors.Is(err, stock.ErrOrderClosed)
}

// returnCopy reverts the order's copy at the record, if it holds one, after
// the gate ended the hold. A record that implements stock.OrderReader is
// read first (cheaper than a revert that finds nothing, the usual case: an
// order that expired in the queue never reached the record), and a copy it
// has confirmed is left alone, as by ReclaimExpired.
func (m *Manager) returnCopy(ctx context.Context, id string) error {
	if rd, ok := m.record.(stock.OrderReader); ok {
		infos, err := rd.Orders(ctx, []string{id})
		if err != nil {
			return &TierError{Tier: Record, Op: "read after the gate closed", Err: err}
		}
		if len(infos) != 1 || infos[0].State != stock.StateHeld {
			return nil
		}
	}
	return m.revertRecord(ctx, id)
}

// revertRecord reverts the order's copy at the record after the gate ended
// the hold. A failure is a *TierError (infrastructure, so the caller calls
// Settle again and this is retried); until then the record's own deadline
// bounds the copy's life.
func (m *Manager) revertRecord(ctx context.Context, id string) error {
	if err := m.record.Revert(ctx, id); err != nil && !errors.Is(err, stock.ErrUnknownOrder) {
		return &TierError{Tier: Record, Op: "revert after the gate closed", Err: err}
	}
	return nil
}
