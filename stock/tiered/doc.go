// Package tiered is the order flow across two stock tiers: a fast gate
// (Redis, package stock/redisstock) that admits orders, and a record (SQL,
// package stock/sqlstock) that is the truth. It is the wiring every shop
// with "Redis in front, the database behind" would otherwise write by hand,
// and it is where the bugs of that wiring live, so it is written once here.
//
// # The flow
//
// [Manager.Deduct] takes the hold at the gate first, then hands the order to
// the record. With no [Recorder] configured the hand-off is synchronous: the
// record's Deduct runs inside the call, and Deduct returns nil only once the
// order is recorded. With a Recorder, the order is handed to the
// application's own queue and Deduct returns as soon as the gate holds it;
// the queue's consumer later calls [Manager.Settle], which records it.
// [Manager.Place] tells the caller which of the two happened ([Recorded] or
// [Pending]); Settle's result tells the consumer how the order ended. A
// Recorder that is also an [Admitter] is asked before the gate whether a
// new order may be taken at all: a queue that lags refuses it (retryable,
// nothing held) rather than let the gate sell holds that would expire
// before the record sees them. Package handoff is such a Recorder, with a
// consumer that calls Settle, over a broker adapter. The gate decides
// until when a pending order is held: [Manager.HeldUntil] tells the
// consumer (an extended hold outlives the deadline its message carries),
// and the retry of an order Place answered half-way is handed off with
// its gate deadline to a [DeadlineRecorder].
//
// When the record refuses an order for good (a business outcome: sold out
// there, conflict, limit), the gate hold is reverted and the caller gets the
// record's error. When the record fails for an infrastructure reason, the
// gate hold is left in place and the error returned: calling Deduct (or
// Settle) again with the same order is safe and finishes the job, and if
// nobody does, the gate's reclaimer returns the hold at its deadline.
//
// After recording, the gate is asked once more about the order (an
// idempotent re-Deduct that takes nothing). If a Revert closed the order at
// the gate in the meantime, or the gate's reclaimer returned the hold, the
// record's copy is reverted. Together with Revert's order (gate first, then
// record) this closes the race between a cancel or an expiry and a
// hand-off: whatever the interleaving, an order whose hold ended at the
// gate does not stay held at the record. A redelivered hand-off whose gate
// hold has ended reverts the record's copy too (an earlier delivery may
// have written it and stopped); one whose hold the gate still has past
// its deadline (not reclaimed yet) changes nothing, as a repeat on every
// backend, and the reclaimer returns both copies (a repeat of an order the
// record has confirmed, a sale, succeeds). The price is a second gate round trip per
// order, small next to the record's transaction.
//
// # A gate that lost its data
//
// When the recheck finds that the gate lost the order (its data was lost,
// and the re-Deduct is refused as a new order would be), the record's copy
// is reverted before the refusal is reported. A gate that cannot answer
// (stock.ErrUnavailable, a timeout) leaves the order half-way: a
// *TierError, and the caller retries with the same order.
//
// A gate that lost its data and was rebuilt no longer knows the orders it
// held, and refuses a repeat of one as if it were new (sold out: the
// rebuilt gate counts the record's holds as taken). So a gate's refusal is
// checked against the record, one read by order ID: an order the record
// has gets what a repeat gets by the contract (nil while it is held or
// confirmed, stock.ErrHoldExpired past its gate deadline), not the
// refusal. Only refused orders pay this read; an admitted order costs
// what it did. So a rebuilt gate that still has the units admits the
// repeat as a new order, and the record answers it as the repeat it is:
// the gate holds the order's units a second time, and sells that much
// less than the record has (never more) until a reconcile pass corrects
// it (a Shop's Run makes one every reconcile.Config.Interval). The copy
// the gate takes again has the gate's hold time from the repeat, not the
// order's deadline, and the node that remembers a fallback took the order
// still confirms and extends it at the record alone (package degrade): an
// extension made before the repeat, or at the record alone after it, is
// not the gate's, whose reclaimer returns its copy, and the record's with
// it, at the gate copy's own deadline. Resend a Deduct with the same order
// only while its outcome is unknown.
//
// With a Recorder, the orders still on their way to the record when the
// gate lost its data are in neither tier's count: a rebuild from the
// record gives their units to the gate again, and a queued order whose
// units the rebuilt gate sold meanwhile is refused by the record when
// Settle reaches it (sold out), though the gate told its buyer yes. Keep
// the gate's data where a hand-off is queued (Redis persistence,
// replicas).
//
// # Errors: one rule
//
// A business error from the Manager is final and its effects are undone:
// the order holds nothing at either tier. An error from before anything
// was written (bad input, a context already done, the gate's first answer
// when it is not a business one) is returned as the tier gave it. Every
// error after a tier was written is a [*TierError], which matches
// stock.ErrUnknownOutcome and neither a business error nor
// stock.ErrContention or stock.ErrUnavailable (its Err field keeps the
// tier's answer): call the same method again with the same order ID, or
// the same stock.Restock, and the retry finishes the job. A refusal whose
// undo failed is such an error too (TierError.Outcome says which); a retry
// after a gate revert that did land answers stock.ErrOrderClosed: refused,
// holding nothing.
//
// # Hold times: the gate decides
//
// The gate admits an order first and the record receives it later (the
// hand-off delay: a queue, a retry), so with equal hold times the record's
// deadline would come a little after the gate's. The gate would return an
// unpaid hold and sell the unit again while the record still held it, and
// the record would refuse the new order as sold out: on a hot SKU, every
// resale. So one tier decides when a hold ends, and it is the gate:
//
//   - [Manager.PutOnSale] writes the listing's hold time at the gate and a
//     longer one at the record ([Manager.RecordHold]: the hold time plus
//     Config.RecordGrace, by default twice the hold time). Put SKUs on sale
//     through the Manager, or give the record RecordHold yourself.
//   - [Manager.ReclaimExpired] runs the gate's reclaimer, four holds at a
//     time, and reverts at the record each order whose gate hold it
//     returned, at once. Then a follow-up asks the record for the copies
//     it still holds past their gate deadline and the gate about each, and
//     returns those whose gate hold has ended: a revert that failed, or a
//     reclaim reply that was lost, costs one pass, not a sale. Last it
//     drains the record's own reclaimer, which in normal operation finds
//     nothing: its deadline is the backstop.
//   - Between the gate's return of a hold and the record's revert of its
//     copy (a few record round trips) the gate may sell the unit again,
//     and a fast hand-off may reach the record first. So a refusal by the
//     record for want of units or quota is asked again once, after
//     Config.RecheckAfter (25ms), before it stands. This narrows the
//     window; closing it needs a gate that lists its due holds before
//     returning them, which the stock.Reclaimer contract does not offer.
//
// Several nodes may run the reclaimer: the gate returns each hold to one of
// them, and Revert is exactly-once, so a repeat at the record (by another
// node, or by a Settle's recheck) changes nothing. A node that stops
// between the gate's reclaim and the record's revert leaves the record's
// copy until the next pass of any node's follow-up; only while the gate
// cannot be asked does it stay until the record's own deadline, and
// meanwhile the gate may resell the units and the record refuses those
// orders (a missed sale, never an oversell). RecordGrace must exceed the
// reclaimer's interval plus the clock skew between nodes, or the record's
// sweep would end holds the gate still counts (harmless for stock, but a
// buyer paying in that gap is refused: a Confirm that stopped between the
// gate and the record, found by the follow-up after the record's deadline,
// is undone at the gate too). Config.Clock must tell the time the tiers
// tell.
//
// Orders taken at the record alone (a fallback while the gate was down,
// package degrade) are unknown to the gate, so the follow-up returns them
// at the gate deadline they would have had: the listing's hold time. The
// follow-up runs only after a gate pass that answered: while the gate
// cannot be reached, the record's own reclaimer returns them at the
// record's deadline (Config.RecordGrace later).
//
// # At the record alone
//
// [Manager.Fallback] is the flow at its record alone, the fallback package
// degrade sends calls to while the gate cannot take them: the record's
// hold times, and every decision (a late Confirm, an extension, a repeat)
// by the order's gate deadline, as the flow decides for an order its gate
// does not know. Every unit it moves at the record alone (an order taken
// or returned, a listing, a restock), and every unit the follow-up, the
// record's own reclaimer or the flow's Revert and RevertItems return for
// an order the gate does not know, is reported to Config.OnDrift with its
// SKUs: the gate must be brought to agree (package reconcile) before it
// takes traffic again, and package stockguard does it as the reports
// come.
//
// # Own hold times and extended holds
//
// Every record deadline is its gate deadline plus one grace G (the
// RecordGrace, or with zero the order's SKUs' gate hold time), and the
// flow reads the gate deadline back from the record's by subtracting G.
// So each way of setting a deadline keeps that distance:
//
//   - PutOnSale gives the record a MaxHoldTTL of the listing's plus G
//     ([Manager.RecordListing]).
//   - An order with its own hold time (stock.Order.HoldTTL) gets it at the
//     gate and the same plus G at the record ([Manager.RecordOrder]; with
//     RecordGrace zero, G is read from the record's hold times of the
//     order's SKUs, one Levels per SKU, only for such orders).
//   - [Manager.ExtendHold] extends at the gate, whose answer decides, then
//     at the record to the new deadline plus G ([Manager.RecordDeadline]).
//     An extension the gate could not take (stock.ErrUnavailable) is
//     never answered nil: the gate may keep its old deadline, so the
//     caller calls again.
//
// Deadlines are capped at stock.MaxHoldTTL from the Deduct: near it the
// record's deadline comes less than G after the gate's (at worst with
// it), and a copy the gate does not know is returned that much early.
//
// # Partial reverts
//
// [Manager.RevertItems] reads the record first (an order it does not have
// yet, pending with a Recorder, is stock.ErrUnknownOrder and nothing
// changes: its hand-off would write the whole order after a return at the
// gate alone), then gives the units back at the gate, then at the record,
// with the same operation ID, so a retry after a record failure applies
// nothing twice. The gate decides: a return it applied while it held the
// order is applied, and its answer is nil even when the record's copy
// ended between the two steps (the reclaimer returned the rest at the
// gate's deadline and the whole copy at the record, which gave back the
// return's units too). Every later step (Confirm, Revert, the reclaimer)
// counts what is left of the order at each tier. An order the gate does
// not know is returned at the record alone, and the return's SKUs go to
// Config.OnDrift; while the gate cannot be asked, a return waits for it
// (stock.ErrUnavailable, nothing written): [Fallback.RevertItems] makes
// none.
//
// # Confirm, Revert and the reclaimer
//
//   - Confirm reads the order at the record first (it is the truth). A
//     held order is confirmed at the gate, then at the record: the hold
//     began at the gate, so its deadline decides, and the record's copy
//     of an order the gate ended is never confirmed: when the gate says
//     the hold expired, or a Revert closed the order there first, the
//     copy is returned and the answer (stock.ErrHoldExpired, or
//     stock.ErrOrderClosed) is final; an order a Revert closed reads as
//     reverted (or refunded), and a Confirm racing that Revert answers
//     stock.ErrOrderClosed. A copy past its own deadline at the record
//     is expired whatever the gate holds, and the gate's hold ends
//     expired with it; a sale the gate has of an order whose record copy
//     ended (a Confirm that stopped between the tiers) is left as it is
//     and reported to Config.OnDrift, as Revert leaves one: a refund
//     there would pay out units reconciliation counts back into the
//     gate. When the gate does not know the
//     order at all (flushed, or taken by a fallback while the gate was
//     down) the record decides by the order's gate deadline, as the
//     follow-up does, and a sale before it is reported to
//     Config.OnDrift. A gate that cannot be asked (or whose answer was
//     lost) may still hold the order and would return it at its
//     deadline: the record confirms nothing then, and the caller calls
//     again. An order the record has confirmed is a sale: a
//     repeated Confirm returns nil whatever the gate says (a fallback's
//     Confirm while the gate was down included). A sale the record
//     refunded is closed whatever the gate says (its hold of a sale
//     confirmed at the record alone may have expired there): Confirm and
//     a repeat Deduct answer stock.ErrOrderClosed, as Orders reads it.
//   - Revert reverts at the gate, then at the record. It returns nil when
//     either tier reverted, stock.ErrUnknownOrder only when neither knew the
//     order. An order the gate does not know (it lost its data, or a
//     fallback took it) is reverted at the record alone, as
//     [Fallback.Revert] does, and its SKUs go to Config.OnDrift; the gate
//     is then asked again, since a Deduct racing the Revert may have
//     placed its hold there meanwhile, and a hold found is returned. It reads
//     the record first: an order the record returned already (at the
//     record alone, perhaps, while the gate kept a copy) is a repeat, and
//     at the gate only a copy still held is returned; a sale the gate
//     still has is not refunded there again.
//   - ReclaimExpired (above) reports the lines the gate returned, since the
//     gate is the tier Levels reports. The record is asked about the
//     orders first: one it has confirmed (a Confirm that reached the record
//     but not the gate, which a fallback answers while the gate is down)
//     is a sale and is not refunded; the units the gate returned for it go
//     to Config.OnDrift, for reconciliation to take back at the gate.
//
// A failure at the second tier of any call returns an error that names the
// tier (*TierError); every call is idempotent, so calling it again finishes
// the job. Restock too: it carries an operation ID that each tier applies
// once, record first, then gate. A restock the record has and the gate not
// yet is in flight for reconciliation, not drift, and a retry with the same
// stock.Restock adds it at the gate once.
//
// # Tiers and wrappers
//
// [New] takes a [GateStore] and a [RecordStore]: a stock.Manager with the
// optional interfaces the flow relies on (stock.Reclaimer,
// stock.OrderReader, stock.PartialReverter and stock.HoldExtender, and
// stock.HoldLister and stock.HoldReverter at the record). Asking for them
// in the types means a tier that lacks one, or a wrapper (metrics,
// tracing, faults) that forwards only stock.Manager, is refused when the
// program is built; found by a type assertion at run time, a missing
// stock.OrderReader would make the reclaimer refund confirmed sales. A
// wrapper must forward every interface of the store it wraps
// (stocktest.Faulty does).
//
// # Reads
//
// Available and Levels are answered by the gate: it is the fast path and
// the tier that admits orders. Ask [Manager.Record] for the record's view.
// With a Recorder, the gate counts pending orders as held and the record
// does not count them yet.
//
// # Promises
//
// With tiers that keep the stock.Manager contract, a Manager keeps it too
// (it passes package stocktest with a synchronous hand-off): nothing is
// oversold at either tier, an order ID takes and returns stock at most once
// per tier, and every hold ends confirmed or returned by the reclaimer, at
// the gate's deadline (the record's copy with it, or at the latest at the
// record's own deadline).
// A Manager is safe for concurrent use and keeps no state of its own, so any
// number of application nodes can share the same two tiers.
package tiered
