package tiered

import (
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/stock"
)

// TierError is a failure at one tier after the call had already written
// (the other tier, or this one earlier in the call): the job is half-way.
// Calling the same method again with the same order, or the same
// stock.Restock, is safe and finishes it; until then the record-side
// follow-up of ReclaimExpired, reconciliation (for a restock) and the
// deadlines bound what is left half-way.
//
// It matches stock.ErrUnknownOutcome, so a caller that retries on that
// error retries on this one. errors.Is and errors.As see through it to the
// tier's error (a net.Error, a context error), except to the answers that
// would describe the whole call wrongly: a business error (the refusal is
// not final while its effects are not undone) and stock.ErrContention or
// stock.ErrUnavailable (those say nothing was applied, and the call had
// written). The tier's error is in Err, unchanged.
type TierError struct {
	// Tier is the tier that failed.
	Tier Tier
	// Op is the step that failed, e.g. "deduct" or "recheck".
	Op string
	// Err is the failing tier's error.
	Err error
	// Outcome, when set, is the business outcome the call had reached and
	// was making both tiers agree on when Tier failed: for example the
	// record's refusal whose gate hold could not be reverted, or the
	// gate's "hold expired" when the record's confirm could not be undone.
	// A retry that finishes the job returns it. errors.Is does not match
	// it: it is not final yet.
	Outcome error
}

func (e *TierError) Error() string {
	s := "tiered: " + e.Op + " at the " + string(e.Tier) + ": " + e.Err.Error()
	if e.Outcome != nil {
		s += " (finishing: " + e.Outcome.Error() + ")"
	}
	return s
}

// Is reports whether target is stock.ErrUnknownOutcome.
func (e *TierError) Is(target error) bool { return target == stock.ErrUnknownOutcome }

// Unwrap returns the tier's error as seen from the whole call: errors.Is
// and errors.As reach what it wraps except the business errors,
// stock.ErrContention and stock.ErrUnavailable (see TierError).
func (e *TierError) Unwrap() error { return tierCause{e.Err} }

// tierCause hides, from errors.Is and errors.As, the classes of a tier's
// error that do not hold for the call that wrapped it.
type tierCause struct{ err error }

func (c tierCause) Error() string { return c.err.Error() }

func (c tierCause) Is(target error) bool {
	if hidden(target) {
		return false
	}
	return errors.Is(c.err, target)
}

func (c tierCause) As(target any) bool {
	switch target.(type) {
	case **stock.SKUError, **stock.InvalidError:
		return false // they carry business sentinels
	}
	return errors.As(c.err, target)
}

// hidden reports whether target is an error class that a tier's answer
// may carry but the call that wrapped it must not report.
func hidden(target error) bool {
	return target == stock.ErrContention || target == stock.ErrUnavailable || stock.IsBusiness(target)
}

// ErrNotAdmitted wraps an Admitter's refusal of a new order (Place and
// Deduct match both): the flow turned the order away before its gate,
// nothing was applied, and the gate and record are healthy, so package
// degrade does not count it against the flow's breaker. Retry later.
var ErrNotAdmitted = errors.New("tiered: not admitted: the hand-off refused new orders")

// ErrWaitsForGate answers a return the record path cannot make alone
// (Fallback.Revert of a sale, Fallback.RevertItems): units go back through
// the gate, whose copy would otherwise give them back a second time once
// reconciliation counted the record's return into it. Nothing was
// written: call again through the flow (package degrade does, outside
// ForceFallback mode), which returns at the record alone an order its
// gate does not know. It matches stock.ErrUnavailable.
var ErrWaitsForGate = fmt.Errorf("tiered: the units go back through the gate, which cannot be asked: %w", stock.ErrUnavailable)

// errBucketsWaitForGate answers a listing that names a bucket count at the
// record alone (see Fallback.PutOnSale).
var errBucketsWaitForGate = fmt.Errorf("tiered: a listing that names a bucket count is put on sale through the gate, which keeps each SKU's count (the record has none): retry once the gate answers, or set Buckets 0 to keep the SKU's count: %w", stock.ErrUnavailable)
