package stock

import (
	"context"
	"time"
)

// State is where an order is in its life (see the package doc's diagram).
type State uint8

// The states of an order. StateUnknown is an order the backend never saw,
// or whose record it no longer keeps.
const (
	StateUnknown State = iota
	StateHeld
	StateConfirmed
	StateReverted
	StateRefunded
	StateExpired
)

var stateNames = [...]string{"unknown", "held", "confirmed", "reverted", "refunded", "expired"}

// String returns the state's lower-case name, e.g. "held".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + itoa(int64(s)) + ")"
}

// Takes reports whether an order in this state has its units: held or
// confirmed.
func (s State) Takes() bool { return s == StateHeld || s == StateConfirmed }

// OrderInfo is what a backend knows of one order.
type OrderInfo struct {
	ID     string
	UserID string
	// Items are the order's lines, sorted by SKU; nil when State is
	// StateUnknown.
	Items []Item
	State State
	// Deadline is when a held order's units return; zero when unknown.
	Deadline time.Time
	// Returned are the units partial reverts gave back, per line, sorted
	// by SKU (only lines with some); nil when none were. What the order
	// still takes is Items less Returned.
	Returned []Item
}

// OrderReader is implemented by backends that can report their orders and
// what each user has taken: a caller asks it, after any failure, whether a
// call wrote (what order X holds, in what state, until when; how many
// units of SKU S user U has); the tiered flow asks it whether an order is
// recorded yet, and reconciliation which of the gate's holds the record
// has not seen. Every shipped backend implements it.
type OrderReader interface {
	// Orders returns what the backend knows of each ID, in the order
	// given; IDs it does not know come back with StateUnknown. Invalid
	// IDs fail the whole call with ErrInvalid.
	Orders(ctx context.Context, ids []string) ([]OrderInfo, error)
	// UserUnits returns the units of sku that userID's orders hold or
	// have bought and not returned: what the SKU's per-user limit counts
	// (0 for a user with none). It fails with ErrUnknownSKU for a SKU
	// that is not on sale and ErrInvalid for a bad SKU or user ID.
	UserUnits(ctx context.Context, sku, userID string) (int64, error)
}
