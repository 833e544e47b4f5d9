package stock

import (
	"context"
	"time"
)

// Item is one line of an order: Qty units of one SKU.
type Item struct {
	SKU string
	Qty int64
}

// Order is what a buyer asks for: all of Items, or nothing.
//
// ID is the idempotency key: every call about the order names it, and a
// repeated call with the same ID never takes or returns stock twice. UserID
// is needed when any of the SKUs has a per-user limit.
type Order struct {
	ID     string
	UserID string
	Items  []Item
	// HoldTTL, if not zero, is the order's own hold time, in place of the
	// shortest hold time of its SKUs (for example a payment method with a
	// shorter or longer window): at least a millisecond, and at most the
	// shortest MaxHoldTTL of its SKUs, or Deduct fails with ErrHoldTooLong.
	// It is not part of the order's identity: a repeated Deduct with
	// another HoldTTL is the same order, and the first deadline stands.
	// Like every hold time it counts in whole milliseconds (truncated).
	HoldTTL time.Duration
}

// Listing puts a SKU on sale. The zero values of PerUserLimit and HoldTTL
// mean "no per-user limit" and [DefaultHoldTTL].
type Listing struct {
	// SKU names the item on sale.
	SKU string
	// Units is the number of units available; PutOnSale overwrites the
	// available count with it.
	Units int64
	// PerUserLimit is the most units of this SKU one user may hold or have
	// bought at a time; 0 means no limit.
	PerUserLimit int64
	// HoldTTL is how long a deduction waits for Confirm before its units
	// are returned; 0 means DefaultHoldTTL.
	HoldTTL time.Duration
	// MaxHoldTTL is the longest a hold of this SKU may last, counted from
	// its Deduct: the bound of an order's own Order.HoldTTL and of
	// HoldExtender.ExtendHold. 0 means the hold time itself (orders may
	// ask for shorter holds only, and holds cannot be extended); otherwise
	// it lies between the hold time and stock.MaxHoldTTL. Backends keep
	// both hold times in whole milliseconds (truncated).
	MaxHoldTTL time.Duration
	// Buckets splits the SKU's units over that many gate states on
	// different hash slots of a Redis Cluster, so that one hot SKU's sale
	// runs on several masters (stock/redisstock; see "Buckets" there). The
	// count is set when the SKU is first put on sale: 0 keeps the SKU's
	// count (1 for a SKU new to the gate), another count is refused. At
	// most MaxBuckets. Backends that keep a SKU in one place
	// (the SQL record, memstock, a Redis without hash slots) ignore it.
	Buckets int
}

// MaxBuckets is the largest Listing.Buckets.
const MaxBuckets = 16

// DefaultHoldTTL is the hold time of a Listing that does not set one.
const DefaultHoldTTL = 15 * time.Minute

// Levels are the unit counts of one SKU as a backend sees them.
type Levels struct {
	// Available units can be deducted now.
	Available int64
	// Held units are taken by orders that are neither confirmed nor returned.
	Held int64
	// Sold units are taken by confirmed orders (refunds subtract them).
	Sold int64
	// PerUserLimit, HoldTTL and MaxHoldTTL are the SKU's current
	// settings (HoldTTL and MaxHoldTTL with their defaults filled in).
	PerUserLimit int64
	HoldTTL      time.Duration
	MaxHoldTTL   time.Duration
}

// Manager is the contract every stockguard backend keeps. All methods are
// safe for concurrent use, from any number of processes sharing one store.
//
// The methods validate their input before any I/O and return an error
// wrapping [ErrInvalid] for bad input, with nothing written.
type Manager interface {
	// PutOnSale overwrites the SKU's available units and sets its per-user
	// limit and hold time. Holds and sales already recorded are kept: they
	// are not part of the new available count.
	PutOnSale(ctx context.Context, l Listing) error

	// Restock adds r.Units to a SKU that is on sale, once per r.OpID: a
	// repeat with the same operation ID adds nothing and returns nil (for
	// as long as the backend remembers the ID, see each backend's
	// Retention), and the same ID with another SKU or count fails with
	// ErrConflict. It fails with ErrUnknownSKU if the SKU is not on sale.
	// After ErrUnknownOutcome, call it again with the same r.
	Restock(ctx context.Context, r Restock) error

	// Deduct places a hold on every item of the order, or on none. It
	// returns ErrSoldOut or ErrLimitReached (as a *SKUError naming the
	// line) when a line cannot be taken, ErrUnknownSKU when a SKU is not on
	// sale, and ErrConflict when the order ID was used for other items or
	// another user. A repeated Deduct of a held or confirmed order returns
	// nil and takes nothing more; of an order whose hold passed its
	// deadline (reclaimed or not yet) it returns ErrHoldExpired.
	//
	// The order has one deadline: now plus o.HoldTTL if it is set, else
	// plus the shortest hold time of its SKUs. All its lines expire
	// together. An o.HoldTTL past the shortest MaxHoldTTL of its SKUs is
	// ErrHoldTooLong (as a *SKUError naming that SKU's line).
	Deduct(ctx context.Context, o Order) error

	// Confirm makes a held order's sale final: its units no longer expire.
	// It returns nil for an order already confirmed, ErrHoldExpired once
	// the deadline has passed (returning the units if the reclaimer has not
	// yet), ErrOrderClosed for a reverted order and ErrUnknownOrder for an
	// order that took nothing.
	Confirm(ctx context.Context, orderID string) error

	// Revert returns what the order took, and the user's quota, exactly
	// once: a held order is cancelled, a confirmed order is refunded. A
	// repeated revert, or a revert of an expired order, returns nil and
	// changes nothing. An order that took nothing gets ErrUnknownOrder.
	Revert(ctx context.Context, orderID string) error

	// Available returns the units of the SKU that can be deducted now, or
	// ErrUnknownSKU.
	Available(ctx context.Context, sku string) (int64, error)

	// Levels returns the SKU's available, held and sold units and its
	// settings, or ErrUnknownSKU.
	Levels(ctx context.Context, sku string) (Levels, error)
}

// Restock is an administrative addition of units to a SKU on sale. OpID
// makes it idempotent: every tier and every retry applies one OpID once.
type Restock struct {
	// OpID names the operation: choose a new one for each restock (for
	// example the delivery note's number) and reuse it on every retry.
	OpID string
	// SKU names the SKU, which must be on sale.
	SKU string
	// Units is how many units to add, 1..MaxUnits.
	Units int64
}

// Reclaimed is one order line whose units a reclaimer returned.
type Reclaimed struct {
	OrderID string
	UserID  string
	SKU     string
	Qty     int64
}

// Reclaimer is implemented by backends whose holds expire. ReclaimExpired
// returns the units of at most limit holds (order lines) whose deadline
// has passed, and reports them; a backend that returns an order's lines
// together (the SQL record, memstock) reports all of the last order's
// lines, so a pass may report more than limit when an order has lines
// beyond it. Any number of reclaimers may run at once: each hold is
// returned by exactly one of them, and never one that was confirmed.
//
// An error means the pass may have returned holds it could not report
// (ErrUnknownOutcome): the holds are returned all the same, and a caller
// that acts on each report (the tiered flow) must find the rest another way
// (see HoldLister).
type Reclaimer interface {
	ReclaimExpired(ctx context.Context, limit int) ([]Reclaimed, error)
}

// HoldLister is implemented by backends that can list their live holds by
// deadline. The tiered flow asks the record for the holds whose gate
// deadline has passed, so that a record copy whose gate hold ended is
// returned even when the report of that end was lost.
type HoldLister interface {
	// HeldBefore returns at most limit orders that are held with a
	// deadline at or before t, earliest deadline first.
	HeldBefore(ctx context.Context, t time.Time, limit int) ([]OrderInfo, error)
}

// HoldReverter is implemented by backends that can return a hold without
// ever refunding a sale. The tiered flow returns a record copy whose gate
// hold ended with it: a Confirm that confirmed the copy a moment after the
// flow read it as held keeps its sale.
type HoldReverter interface {
	// RevertHeld returns what a held order took, and the user's quota, as
	// the reclaimer does at its deadline: the order ends expired (a repeat
	// Deduct gets ErrHoldExpired, as it would from the tier that decided
	// the hold's end), and it changes nothing for an order in any other
	// state; the check and the return are one atomic step. It reports the
	// state it found the order in: StateHeld for an order it returned,
	// StateConfirmed for a sale it left alone, StateReverted,
	// StateRefunded or StateExpired for one already returned (a repeat,
	// or a retry whose first reply was lost, finds StateExpired), and
	// StateUnknown, with a nil error, for an order that took nothing.
	RevertHeld(ctx context.Context, orderID string) (State, error)
}

// Return gives back part of an order: some units of some of its lines (a
// partial cancel of a held order, a partial refund of a confirmed one).
type Return struct {
	// OpID names this return within its order: choose a new one for each
	// return (for example the refund's number) and reuse it on every
	// retry.
	OpID string
	// OrderID names the order.
	OrderID string
	// Items are the units to give back, one line per SKU of the order,
	// each at most what that line still has.
	Items []Item
}

// PartialReverter is implemented by backends that can return part of an
// order. Every shipped backend implements it.
type PartialReverter interface {
	// RevertItems gives back r.Items of order r.OrderID, and the user's
	// quota for them, once per r.OpID within the order: units of a held
	// order return to the available count as a cancel's do, units of a
	// confirmed order as a refund's. All of r's lines or none. The rest of
	// the order keeps its state and its deadline; once every unit of the
	// order has been given back it is reverted (refunded, if it was
	// confirmed), and a later Revert returns only what is left.
	//
	// A repeat of r returns nil and changes nothing (for as long as the
	// backend keeps the order, see each backend's Retention); the same
	// OpID with other items is ErrConflict. It returns ErrExceedsOrder (as
	// a *SKUError naming the line) for a line that asks more than the
	// order line still has or names a SKU the order does not have,
	// ErrHoldExpired for a held order past its deadline, ErrOrderClosed for
	// a reverted order and ErrUnknownOrder for an order that took nothing.
	// After ErrUnknownOutcome, call it again with the same r.
	RevertItems(ctx context.Context, r Return) error
}

// HoldExtender is implemented by backends whose holds can be extended.
// Every shipped backend implements it.
type HoldExtender interface {
	// ExtendHold moves a held order's deadline, for all its lines, out to
	// deadline (kept to the millisecond, as every deadline is). The
	// deadline only grows: one at or before the current deadline changes
	// nothing and returns nil, so a repeat, or a late retry of an earlier
	// extension, is harmless. The reclaimer and reconciliation honour the
	// new deadline.
	//
	// It returns ErrHoldTooLong for a deadline past the order's bound (the
	// Deduct's time plus the shortest MaxHoldTTL its SKUs had then),
	// ErrHoldExpired once the current deadline has passed, ErrOrderConfirmed
	// for a confirmed order, ErrOrderClosed for a reverted one and
	// ErrUnknownOrder for an order that took nothing.
	ExtendHold(ctx context.Context, orderID string, deadline time.Time) error
}
