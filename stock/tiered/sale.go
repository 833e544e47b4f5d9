package tiered

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// PutOnSale puts the SKU on sale at the record, then at the gate. The gate
// gets the listing as it is; the record gets it with a longer hold time
// (RecordHold) and, when the listing sets one, a MaxHoldTTL longer by the
// same grace (RecordListing), so that the gate's deadline always comes
// first, for orders with their own hold time and extended holds too. It
// is idempotent: after a *TierError naming the gate, call it again. The
// gate is asked first (ListingChecker): a listing it would refuse
// (another bucket count) is refused with nothing written. One it refuses
// after the record took it (another node's first listing of the SKU in
// another count, between the check and the write) is a *TierError, and
// the SKU is reported to Config.OnDrift: the record then has this
// listing, written last, and the gate the other node's bucket count, with
// its counts brought down to the record's by the repair. Put a new SKU on
// sale from one place, or again once both calls have answered.
func (m *Manager) PutOnSale(ctx context.Context, l stock.Listing) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpPutOnSale, 1)
	defer func() { tr.Done(err) }()
	if err := l.Validate(); err != nil {
		return err
	}
	// Nothing is written yet: the gate's refusal, or its failure to
	// answer, is the call's.
	if err := m.gate.CheckListing(ctx, l); err != nil {
		return err
	}
	if err := m.record.PutOnSale(ctx, m.RecordListing(l)); err != nil {
		return err
	}
	if err := m.gate.PutOnSale(ctx, l); err != nil {
		if stock.IsBusiness(err) {
			// Refused since the check (a first listing of the SKU in
			// another bucket count, from another node): the record has
			// this listing, the gate the other; reconciliation brings the
			// gate's counts down to the record's.
			m.drift(Drift{Tier: Gate, Op: "put on sale", SKUs: []string{l.SKU}, Err: err})
		}
		return &TierError{Tier: Gate, Op: "put on sale", Err: err}
	}
	return nil
}

// ListingChecker is what a gate tells of listings, which its record
// cannot: package redisstock's Store keeps, on a Redis Cluster, each SKU's
// bucket count (stock.Listing.Buckets), set when the SKU is first put on
// sale, and refuses another.
type ListingChecker interface {
	// CheckListing reports, writing nothing, what the gate's PutOnSale
	// would refuse in l. PutOnSale asks it before it writes the record,
	// so that a listing the gate refuses leaves both tiers as they were.
	CheckListing(ctx context.Context, l stock.Listing) error
	// KeepsBuckets reports, without I/O, whether the gate keeps a bucket
	// count per SKU. Fallback.PutOnSale does not write a listing that
	// names one at the record alone (an error matching
	// stock.ErrUnavailable).
	KeepsBuckets() bool
}

// RecordHold returns the record's hold time for a gate hold time: gate plus
// Config.RecordGrace (default: gate again), at most stock.MaxHoldTTL. Use
// it when putting a SKU on sale at the record alone.
func (m *Manager) RecordHold(gate time.Duration) time.Duration { return m.cfg.RecordHold(gate) }

// GateHold is the smallest gate hold time whose record hold is record (at
// least a millisecond): RecordHold's inverse below stock.MaxHoldTTL. At the
// cap every gate hold time from GateHold(record) up has that record hold
// (RecordHold(GateHold(r)) == r, not GateHold(RecordHold(g)) == g).
// Reconciliation uses it to rebuild a flushed gate from the record
// (reconcile.Config.GateHold).
func (m *Manager) GateHold(record time.Duration) time.Duration { return m.cfg.GateHold(record) }

// RecordHold is the record's hold time for a gate hold time under c: gate
// plus RecordGrace (zero: gate again), at most stock.MaxHoldTTL. A Manager
// with Config c gives its record this hold time (Manager.RecordHold).
func (c Config) RecordHold(gate time.Duration) time.Duration {
	grace := c.RecordGrace
	if grace <= 0 {
		grace = gate
	}
	return min(gate+grace, stock.MaxHoldTTL)
}

// GateHold is the smallest gate hold time whose record hold under c is
// record (at least a millisecond): RecordHold's inverse below
// stock.MaxHoldTTL, and at the cap the least of the gate hold times that
// RecordHold folds onto it. Config{}.GateHold is the
// mapping of a Manager with the default grace, which is what package
// reconcile assumes unless told otherwise.
func (c Config) GateHold(record time.Duration) time.Duration {
	if c.RecordGrace <= 0 {
		return max(record/2, time.Millisecond)
	}
	return max(record-c.RecordGrace, time.Millisecond)
}

// Restock adds r.Units at the record, then at the gate, once per r.OpID
// at each tier: it is idempotent. A repeat with the same r adds nothing
// and returns nil; the same OpID with another SKU or count is
// stock.ErrConflict.
//
// An error from the record step is the record's (nothing reached the gate).
// Once the record has the units, a failure at the gate is a *TierError
// matching stock.ErrUnknownOutcome: call Restock again with the same r,
// which adds nothing more at the record and finishes the job at the gate
// (within the tiers' memory of operation IDs, e.g. redisstock's
// Retention). Until then reconciliation counts the record's operation as
// in flight rather than as drift, for its RestockWindow (by default half
// the gate's Retention), and may finish it at the gate under the same ID,
// which the retry then finds there. A restock the gate has not got when
// the window ends (the gate out of reach longer than that) is counted as
// drift: do not retry it then, its units are at both tiers.
func (m *Manager) Restock(ctx context.Context, r stock.Restock) (err error) {
	ctx, tr := m.obs.Track(ctx, "tiered", observe.OpRestock, 1)
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := m.record.Restock(ctx, r); err != nil {
		return err
	}
	if err := m.gate.Restock(ctx, r); err != nil {
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
