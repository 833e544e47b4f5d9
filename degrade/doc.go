// Package degrade keeps a shop selling when its fast stock tier fails: it
// wraps a primary stock.Manager (the Redis gate, usually as the tiered flow
// of package stock/tiered) and a fallback (the SQL record the primary
// writes to) behind circuit breakers (github.com/sony/gobreaker/v2), and is
// itself a stock.Manager.
//
// Use it when Redis is on the order path and an outage of Redis must not
// stop sales: while the primary fails, orders go to the database's atomic
// UPDATE at a much lower, configured rate; when the primary is back, it is
// recalibrated (reconcile plugs in here) and traffic returns in steps.
//
// # Wiring
//
// The fallback must see every order the primary took: make it the
// primary's record (stock/tiered's record tier). Then an order ID is
// idempotent across both paths, because both end in the same record, and no
// state has to be shared between application nodes. A fallback that does
// not see the primary's orders would sell the same units twice.
//
// An order the fallback takes is unknown to the gate, so the tiered
// reclaimer returns it once the listing's hold time has passed (the gate
// deadline it would have had), not at the record's longer deadline. For
// that the record must hold the listing with the tiered primary's record
// hold time: PutOnSale while degraded writes the fallback's listing with
// it and with the record's MaxHoldTTL (tiered's Manager.RecordListing), as
// the primary writes its record. An order with its own hold time that the
// fallback takes gets the record's hold time for it (RecordOrder), and an
// extension of such an order the record's deadline (RecordDeadline), so
// the primary reads each back as the gate deadline it would have had.
//
// With a queued hand-off (a tiered.Recorder), orders the gate admitted and
// that still wait in the queue are not in the record yet: while the breaker
// is open the fallback may sell their units, and they are refused when the
// queue drains (the record is never oversold, but those buyers lose the
// order). With the synchronous hand-off the record sees every order the
// gate told yes.
//
// # What it promises
//
//   - Only infrastructure failures open a breaker. Business outcomes (sold
//     out, per-user limit, unknown order, conflict...) count as successes,
//     and a call ended by the caller's own context is not counted.
//     stock.ErrUnavailable (a gate that lost its data and is not rebuilt
//     yet) is an infrastructure failure: it counts, and since it says
//     nothing was applied it is returned as it is. A context already done
//     before a Deduct gets its own error and nothing is sent.
//   - While a breaker is open, calls go to the fallback through one token
//     bucket (Config.FallbackLimit, FallbackBurst); a refused call gets
//     ErrBusy and nothing is written. Confirm, Revert, PutOnSale and
//     Restock are not limited.
//   - An order whose outcome on the primary is unknown is never sent to
//     the fallback: it is re-deducted on the primary (idempotent), and if
//     that fails too the caller gets an error matching
//     stock.ErrUnknownOutcome (never together with stock.ErrUnavailable or
//     stock.ErrContention, which say nothing was applied). This node remembers such orders (a bounded
//     LRU, Config.Orders) and sends their retries to the primary only; with
//     the wiring above, a retry that reaches another node and the fallback
//     takes nothing twice, because the record already knows the order.
//   - Confirm and Revert go to the tier that took the order: the one this
//     node remembers, else the primary (while it takes traffic), and on
//     stock.ErrUnknownOrder ("not taken there") the other tier. They answer
//     ErrUnknownOrder only when both tiers do. They are not new traffic, so
//     they reach the primary even while its breaker is open (not in
//     ForceFallback mode, where they answer stock.ErrUnknownOutcome with
//     ErrPrimaryDown instead of asking it).
//   - RevertItems (stock.PartialReverter) goes where Revert goes.
//     ExtendHold (stock.HoldExtender) goes to the fallback only for an
//     order this node remembers the fallback took (or in ForceFallback
//     mode), else to the primary, even while its breaker is open: a hold
//     the gate may have is never extended at the record alone, where the
//     gate would still end it at its old deadline. Both need the two
//     tiers to implement the interface (errors.ErrUnsupported otherwise).
//   - Breakers are one for the shop or one per SKU (Config.PerSKU, bounded
//     by an LRU), so a failing hot SKU does not trip the rest. An operator
//     can force either path (SetMode).
//   - Switching back: after Config.OpenFor, Config.Recalibrate runs in the
//     background while traffic stays on the fallback; only when it succeeds
//     does a share of traffic (Config.RampSteps, default 10% then 50%)
//     return to the primary, each step lasting Config.RampInterval and
//     needing at least one success; one failure during the ramp goes back
//     to degraded.
//   - State changes reach Config.OnStateChange on a goroutine of their own
//     through a bounded buffer: a slow hook never stalls a breaker or a
//     call (events beyond the buffer are dropped and counted).
//
// # Time
//
// gobreaker v2.4 reads the wall clock itself and cannot be given another.
// It is used for what needs no clock: counting failures and deciding to
// trip (ReadyToTrip, IsSuccessful, IsExcluded). The open period, the
// recalibration, the ramp and the fallback's rate limit run on
// Config.Clock, so tests move time without sleeping; a gobreaker that
// tripped is dropped and a fresh one starts the ramp, so its own
// half-open timer is never used.
//
// A Manager is safe for concurrent use. Call Close to stop its goroutines.
package degrade
