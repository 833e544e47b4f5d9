// Package stock is stockguard's contract for selling exactly the stock a shop
// has: one [Manager] interface that every backend keeps, the errors it
// returns, and the validation every backend applies before it writes.
//
// # Concepts
//
// A SKU is one sellable item with an integer count of available units. It is
// put on sale with [Manager.PutOnSale] (which overwrites the count and sets the
// per-user limit and hold time) and topped up with [Manager.Restock] (which
// adds). An [Order] has an idempotency key (its ID), an optional user and one
// or more [Item] lines; it takes all its lines or none.
//
// [Manager.Deduct] places a hold: the units leave the available count and the
// order has until its deadline (now + the SKU's hold time) to be paid.
// [Manager.Confirm] makes the sale final. [Manager.Revert] cancels a hold or
// refunds a confirmed sale and returns exactly the units (and the per-user
// quota) the order took, once. Holds that pass their deadline unpaid are
// returned by a [Reclaimer], driven by [RunReclaimer] on any number of nodes.
//
// # Order states
//
//	Deduct ──▶ held ──Confirm──▶ confirmed ──Revert──▶ refunded
//	             │                                       (units returned)
//	             ├──Revert──▶ reverted  (units returned)
//	             └──deadline passes──▶ expired (units returned by the
//	                                   reclaimer, or by a late Confirm)
//
// Every call is idempotent by order ID:
//
//   - Deduct of an ID that already holds or bought the same items succeeds and
//     takes nothing more; with different items it fails with [ErrConflict]; an
//     ID whose hold expired gets [ErrHoldExpired], a reverted one [ErrOrderClosed].
//   - Confirm of a confirmed order succeeds again; after the deadline it fails
//     with [ErrHoldExpired] and the units go back at once.
//   - Revert of a reverted, refunded or expired order succeeds and changes
//     nothing; of an order that took nothing it fails with [ErrUnknownOrder]
//     and changes nothing.
//
// This is what makes an ambiguous outcome safe: when Deduct fails with a
// timeout the script or transaction may have run. Call Deduct again with the
// same order: it returns nil if the order holds its units, and takes them if
// it does not.
//
// # Promises
//
// Every backend, checked by the conformance suite in package stocktest:
//
//  1. No oversell: units held plus units sold never exceed units put on sale.
//  2. Exactly once: an order ID takes stock at most once and returns it at
//     most once.
//  3. No leak: every hold ends confirmed or returned.
//  4. Per-user limits count holds and confirmed sales, in the same atomic step
//     as the stock.
//  5. Nothing is written for invalid input: [Order.Validate] and
//     [Listing.Validate] run before any I/O.
//
// # Errors
//
// Business outcomes are sentinel errors compared with errors.Is: [ErrSoldOut],
// [ErrLimitReached], [ErrUnknownSKU], [ErrUnknownOrder], [ErrConflict],
// [ErrHoldExpired], [ErrOrderClosed] and [ErrInvalid]. [ErrConflict] also
// answers an order ID reused by another user, and an operation ID reused for
// another restock. A multi-line order
// reports which line failed with a [*SKUError]. [IsBusiness] tells these
// apart from infrastructure failures (timeouts, refused connections), which
// is what a circuit breaker should count.
//
// One rule classifies failures, on every backend and in every composition
// (package stock/tiered, package degrade). An error from before any request
// that could write was sent (bad input, a context already over, a refused
// dial) is returned as it is: nothing was applied, and a context error
// matches the context's. Once such a request was sent, every error matches
// [ErrUnknownOutcome] until a read proves what happened: retry the same call
// with the same order ID (or the same [Restock], whose OpID makes it apply
// once) to learn which; never retry under a new ID. [ErrContention] and
// [ErrUnavailable] say nothing was applied and never come together with
// ErrUnknownOutcome.
//
// # Wrapping a Manager
//
// A wrapper (metrics, tracing, fault injection) must forward the optional
// interfaces of the Manager it wraps: [Reclaimer], [OrderReader],
// [HoldLister] and [HoldReverter]. The tiered flow and reconciliation take them in their
// constructors' parameter types, so a wrapper that drops one does not
// compile there rather than misbehave at run time. stocktest.Faulty is such
// a wrapper.
//
// # Backends
//
// Package stock/redisstock is the Redis+Lua gate; package stock/sqlstock
// holds the SQL backends (atomic UPDATE, optimistic version, pessimistic lock).
// Time is read from a [Clock] the backend is given, so tests move time
// without sleeping.
package stock
