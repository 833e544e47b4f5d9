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
// The fallback must see every order the primary took, or it would sell
// the same units twice. With a stock/tiered flow as the primary that is
// built in: pass nil as the fallback to New, and the Manager sends
// degraded calls to the flow's record path (tiered.Manager.Fallback). It
// writes the flow's own record with the flow's hold times and decides by
// the gate's deadlines, as the flow does for an order its gate does not
// know: an order it takes holds at the record with the grace on top, is
// returned by the flow's reclaimer at the gate deadline it would have had
// once the gate answers again (while it cannot, the flow cannot tell such
// an order from one whose Confirm reached the gate alone, and the record's
// own reclaimer returns it at the record's deadline, the grace later),
// and a late payment is refused on every node alike. An order ID is then
// idempotent across both paths, and no state has to be shared between
// application nodes. New refuses a flow with any other fallback (the raw
// record would take orders with the gate's hold times). Package stockguard
// wires all of this, with reconcile as the recalibration.
//
// With a queued hand-off (a tiered.Recorder), orders the gate admitted and
// that still wait in the queue are not in the record yet: while the breaker
// is open the fallback may sell their units, and they are refused when the
// queue drains (the record is never oversold, but those buyers lose the
// order). With the synchronous hand-off the record sees every order the
// gate told yes.
//
// A write at the fallback alone puts the record ahead of the primary's
// gate, so it is made only while the gate takes no traffic: while the
// breakers of the order's SKUs are open. Before traffic returns, the
// recalibration (a reconcile pass) reads the record after every such write
// this node made; from then on, until all traffic is back, new orders go
// to the primary or get ErrBusy. Another node whose breaker is still open
// may write at the record alone after this node's recalibration read it;
// the reconcile pass that a record-alone write asks for (tiered's
// Config.OnDrift, which package stockguard turns into a repair of those
// SKUs) brings the gate back within the record.
//
// # What it promises
//
//   - Only infrastructure failures open a breaker (and, with per-SKU
//     breakers, orders held off by another SKU's open breaker: see
//     below). Business outcomes (sold
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
//   - The outcome rule of package stock holds through the Manager: a
//     primary error that does not match stock.ErrUnknownOutcome (a refused
//     dial, stock.ErrUnavailable, stock.ErrContention) applied nothing and
//     is returned as it is; it counts for the breaker, and the order's
//     retry goes where new orders go (the fallback once the breaker has
//     opened).
//   - An order whose outcome on the primary is unknown gets an error
//     matching stock.ErrUnknownOutcome (never together with
//     stock.ErrUnavailable or stock.ErrContention) at once: the call does
//     not send it to the primary a second time, so it answers within the
//     bound of one attempt there (the gate client's timeouts, the record's
//     lock waits), not two. This node remembers such orders (a bounded
//     LRU, Config.Orders); a retry with the same order ID finishes the
//     job. A retry while the breaker lets traffic through goes to the
//     primary (idempotent). A retry while the
//     breaker keeps traffic off the primary is settled at a tiered flow's
//     record path (the record knows the order by its ID: it is taken there
//     at most once, and a hold the gate may also have only makes the gate
//     sell less until it expires), and stays the primary's order: the
//     calls that finish it ask the gate, which may hold it, as for any
//     order of the primary; with any other fallback it goes to the
//     primary again (not in ForceFallback mode, where it gets
//     ErrPrimaryDown with stock.ErrUnknownOutcome).
//   - Confirm and Revert go to the tier that took the order: the one this
//     node remembers, else the primary (while it takes traffic), and on
//     stock.ErrUnknownOrder ("not taken there") the other tier. They answer
//     ErrUnknownOrder only when both tiers do. They are not new traffic, so
//     they reach the primary even while its breaker is open (not in
//     ForceFallback mode, where they answer stock.ErrUnknownOutcome with
//     ErrPrimaryDown instead of asking it). A tiered flow's record path
//     refunds no sale alone (tiered.ErrWaitsForGate, nothing written: the
//     gate's copy would give the units back again), so the refund of a
//     sale it took goes through the flow, which refunds it at the record
//     alone once its gate says it does not know the order (in
//     ForceFallback mode it answers tiered.ErrWaitsForGate: retry later).
//   - RevertItems (stock.PartialReverter) goes where Revert goes.
//     ExtendHold (stock.HoldExtender) goes to the fallback only for an
//     order this node remembers the fallback took (or in ForceFallback
//     mode, for another primary than a tiered flow), else to the primary,
//     even while its breaker is open: a hold
//     the gate may have is never extended at the record alone, where the
//     gate would still end it at its old deadline. Both need the two
//     tiers to implement the interface (errors.ErrUnsupported otherwise).
//   - Breakers are one for the shop or one per SKU (Config.PerSKU: an LRU
//     keeps that many closed ones, and forgets the others with the
//     failures they counted; it never forgets one that carries outage
//     state or is in use, so the breakers kept grow past it by at most
//     the SKUs touched during an outage and those of the calls running),
//     so a failing hot SKU does not trip the rest. An order
//     goes to the primary only if the breakers of all its SKUs let it, and
//     to the fallback only if all of them are open. One whose breakers
//     disagree (some open, the others sending traffic to the primary) gets
//     ErrBusy, nothing written (or, in doubt at the primary, is re-placed
//     there as above), and counts as a failure of the primary for those
//     of its breakers that are closed (a ramping one is left to its own
//     orders: one failure would trip it): an order's SKUs move to the
//     fallback together, so an order of several SKUs reaches it within
//     their breakers' threshold (Config.ReadyToTrip) while the primary is
//     down (about that threshold once per PerSKU of its SKUs, for an
//     order of more SKUs than PerSKU). A SKU whose own orders the primary keeps answering (each a
//     success, under the default rule of consecutive failures) is not
//     moved by a few such orders. An operator can force either path
//     (SetMode).
//   - Switching back: after Config.OpenFor, Config.Recalibrate runs in the
//     background, once the fallback's Deducts of this node that were
//     running have ended; meanwhile new orders, PutOnSale and Restock
//     get ErrBusy (nothing written), reads and the calls that finish
//     orders (Confirm, Revert, RevertItems, ExtendHold) go to the
//     fallback as before. Only when it succeeds does a share of new orders
//     (Config.RampSteps, default 10% then 50%) go to the primary, each
//     step lasting Config.RampInterval and needing at least one success;
//     the rest get ErrBusy. One failure during the ramp goes back to
//     degraded. Close cancels a running recalibration.
//   - ReclaimExpired returns the primary's due holds (a tiered flow's
//     include its record's), and the fallback's own when the primary's
//     pass failed or the fallback is a store of its own: a tier that
//     cannot be reached does not keep the other's holds past their own
//     deadlines (with a tiered flow, the record's: an order taken at the
//     record alone comes back at its gate deadline only once the gate
//     answers again, see above).
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
