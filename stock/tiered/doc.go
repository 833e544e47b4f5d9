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
// [Pending]); Settle's result tells the consumer how the order ended.
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
// the gate in the meantime, the record is reverted too. Together with
// Revert's order (gate first, then record) this closes the race between a
// cancel and a hand-off: whatever the interleaving, an order reverted at the
// gate does not stay recorded. The price is a second gate round trip per
// order, small next to the record's transaction.
//
// # Confirm, Revert and the reclaimer
//
//   - Confirm asks the record first (it is the truth), then the gate. An
//     order the record does not know (still pending) gets
//     stock.ErrUnknownOrder and nothing changes: confirm after Settle. A
//     record that says the hold expired or the order was reverted makes the
//     gate release its hold too. The hold began at the gate, so its deadline
//     decides: when the gate says the hold expired, the record's confirm is
//     undone. When the gate does not know the order at all (flushed, or
//     taken by a fallback while the gate was down) the record's sale stands
//     and the disagreement is reported to Config.OnDrift.
//   - Revert reverts at the gate, then at the record. It returns nil when
//     either tier reverted, stock.ErrUnknownOrder only when neither knew the
//     order.
//   - ReclaimExpired runs the record's reclaimer (draining every due hold)
//     and then the gate's, and reports the lines the gate returned, since
//     the gate is the tier Levels reports.
//
// A failure at the second tier of any call returns an error that names the
// tier (*TierError); every call but Restock is idempotent, so calling it
// again finishes the job. Restock is not idempotent (by contract): when the
// record was restocked and the gate was not, the error says so and the gate
// is fixed by reconciliation or by restocking the gate alone ([Manager.Gate]).
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
// per tier, and every hold ends confirmed or returned by a tier's reclaimer.
// A Manager is safe for concurrent use and keeps no state of its own, so any
// number of application nodes can share the same two tiers.
package tiered
