package stock

import (
	"context"
	"errors"
	"strings"
)

// Business outcomes. Compare with errors.Is: backends wrap them with detail.
var (
	// ErrSoldOut: the SKU has fewer units available than the line asks for.
	ErrSoldOut = errors.New("stock: sold out")
	// ErrLimitReached: the line would take the user past the SKU's
	// per-user limit.
	ErrLimitReached = errors.New("stock: per-user limit reached")
	// ErrUnknownSKU: the SKU was never put on sale (not the same as sold
	// out, which it is after its last unit is taken).
	ErrUnknownSKU = errors.New("stock: unknown SKU")
	// ErrUnknownOrder: Confirm or Revert of an order that took nothing.
	// Nothing was changed.
	ErrUnknownOrder = errors.New("stock: unknown order")
	// ErrConflict: the order ID was already used for different items or
	// another user, or the operation ID for another restock.
	ErrConflict = errors.New("stock: ID reused with different content")
	// ErrHoldExpired: the order's hold passed its deadline; its units were
	// returned.
	ErrHoldExpired = errors.New("stock: hold expired")
	// ErrOrderClosed: the order was reverted; its ID cannot take stock again.
	ErrOrderClosed = errors.New("stock: order already reverted")
	// ErrOrderConfirmed: the order is confirmed, so its hold cannot be
	// extended.
	ErrOrderConfirmed = errors.New("stock: order already confirmed")
	// ErrHoldTooLong: the hold asked for (an order's own hold time, an
	// extended deadline) passes the SKU's MaxHoldTTL.
	ErrHoldTooLong = errors.New("stock: hold longer than the SKU allows")
	// ErrExceedsOrder: a partial revert asks for more units of a line than
	// the order still has on it, or names a SKU the order does not have.
	ErrExceedsOrder = errors.New("stock: return exceeds what the order holds")
	// ErrInvalid: the input was refused before anything was written. The
	// error wrapping it says what was wrong (see *InvalidError).
	ErrInvalid = errors.New("stock: invalid input")
)

// Failures that are not business outcomes.
//
// One rule classifies them. An error from before any request that could
// write was sent (invalid input, a context already done, a refused dial) is
// returned as it is: nothing was applied. Once such a request was sent,
// every error matches ErrUnknownOutcome until a read proves what happened;
// the call's own retry with the same IDs is that read. ErrContention and
// ErrUnavailable say nothing was applied, and never come together with
// ErrUnknownOutcome.
var (
	// ErrUnknownOutcome: the request may or may not have been applied (for
	// example a timeout after a script was sent, or a failed COMMIT). Retry
	// the same call with the same order ID: every Manager call is
	// idempotent, so the retry tells which.
	ErrUnknownOutcome = errors.New("stock: outcome unknown, retry with the same order ID")
	// ErrUnavailable: the store cannot answer for the SKU now, for example a
	// Redis gate that lost its data (restart, flush) and has not been
	// rebuilt yet. Nothing was applied; retry later, or use another tier.
	// It is an infrastructure failure, not a business outcome.
	ErrUnavailable = errors.New("stock: store unavailable for this SKU, retry later")
	// ErrContention: the store was too busy to decide (optimistic retries
	// exhausted, lock wait timed out, deadlock). Nothing was applied; the
	// caller may retry. It is never reported as sold out.
	ErrContention = errors.New("stock: contention, retry later")
)

// SKUError names the order line a business outcome applies to.
type SKUError struct {
	SKU string
	Err error
}

func (e *SKUError) Error() string { return e.Err.Error() + ": SKU " + quote(e.SKU) }

// Unwrap returns the sentinel, so errors.Is(err, ErrSoldOut) works.
func (e *SKUError) Unwrap() error { return e.Err }

// IDError names the order (or, for a restock, the operation) a failure
// concerns: its text is `order "o-42": ` (or `restock "op-7": `) before the
// error's own, unless the error already quotes the ID. It matches, through
// Unwrap, whatever Err matches. The composed shop (package degrade, and so
// package stockguard) returns every error of a call about an order or a
// restock as one.
type IDError struct {
	Kind string // "order" or "restock"
	ID   string
	Err  error
}

func (e *IDError) Error() string {
	msg := e.Err.Error()
	q := quote(e.ID)
	if strings.Contains(msg, q) {
		return msg
	}
	return e.Kind + " " + q + ": " + msg
}

// Unwrap returns the error the ID was added to.
func (e *IDError) Unwrap() error { return e.Err }

// NameOrder returns err naming the order id (see IDError), or nil for nil.
func NameOrder(id string, err error) error { return nameID("order", id, err) }

// NameRestock returns err naming the restock operation opID, or nil for
// nil.
func NameRestock(opID string, err error) error { return nameID("restock", opID, err) }

func nameID(kind, id string, err error) error {
	var named *IDError
	if err == nil || id == "" || (errors.As(err, &named) && named.ID == id) {
		return err
	}
	return &IDError{Kind: kind, ID: id, Err: err}
}

// InvalidError says which input was refused and why. It matches ErrInvalid.
type InvalidError struct {
	Field  string // e.g. "order.ID", "order.Items[2].Qty", "listing.Units"
	Reason string
}

func (e *InvalidError) Error() string {
	return "stock: invalid input: " + e.Field + ": " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// IsBusiness reports whether err is a business outcome of a call that
// reached the store: sold out, limit, unknown SKU or order, conflict,
// expired, closed, confirmed, a hold too long, a return past the order or
// invalid input. A circuit breaker should count failures
// for which IsBusiness and context cancellation are both false.
func IsBusiness(err error) bool {
	for _, b := range businessErrors {
		if errors.Is(err, b) {
			return true
		}
	}
	return false
}

var businessErrors = []error{
	ErrSoldOut, ErrLimitReached, ErrUnknownSKU, ErrUnknownOrder,
	ErrConflict, ErrHoldExpired, ErrOrderClosed, ErrInvalid,
	ErrOrderConfirmed, ErrHoldTooLong, ErrExceedsOrder,
}

// IsCanceled reports whether err comes from the caller's context being
// canceled or past its deadline.
func IsCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
