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
}

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
	// PerUserLimit and HoldTTL are the SKU's current settings.
	PerUserLimit int64
	HoldTTL      time.Duration
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

	// Restock adds units to a SKU that is on sale; it fails with
	// ErrUnknownSKU if the SKU was never put on sale.
	Restock(ctx context.Context, sku string, units int64) error

	// Deduct places a hold on every item of the order, or on none. It
	// returns ErrSoldOut or ErrLimitReached (as a *SKUError naming the
	// line) when a line cannot be taken, ErrUnknownSKU when a SKU is not on
	// sale, and ErrConflict when the order ID was used for other items. A
	// repeated Deduct of a held or confirmed order returns nil and takes
	// nothing more.
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

// Reclaimed is one order line whose units a reclaimer returned.
type Reclaimed struct {
	OrderID string
	UserID  string
	SKU     string
	Qty     int64
}

// Reclaimer is implemented by backends whose holds expire. ReclaimExpired
// returns the units of at most limit holds whose deadline has passed, and
// reports them. Any number of reclaimers may run at once: each hold is
// returned by exactly one of them, and never one that was confirmed.
type Reclaimer interface {
	ReclaimExpired(ctx context.Context, limit int) ([]Reclaimed, error)
}
