// Package observe is how stockguard reports what it does, for metrics,
// traces and logs, without depending on any of them.
//
// Every part of the library takes an [Observer] in its Config (memstock,
// redisstock, sqlstock, tiered, degrade, reconcile, limiter). An Observer
// is a struct of optional funcs; the zero value reports nothing and costs
// one nil check per call. Set only the funcs you need:
//
//   - Begin and End bracket each call of a Manager method (Deduct, Confirm,
//     Revert, Restock, PutOnSale, ReclaimExpired), with the component that
//     ran it, the number of order lines, the outcome class ([Classify]) and
//     the latency. Begin may return a derived context: a tracer starts its
//     span there, so the calls a tiered Manager makes to its gate and record
//     become the span's children.
//   - Batch reports each group of calls sent together: a redisstock batch
//     (one script call for many orders) and a sqlstock group (one
//     transaction), with its size and how long its oldest call waited.
//   - Reclaim reports each reclaim pass: orders, lines and units returned,
//     and the reclaimer's lag (how long past its deadline the oldest hold
//     it returned was).
//   - Breaker reports each degrade breaker as it is made, then its state
//     changes.
//   - Correction reports each reconcile finding that changed or was refused
//     a change (corrections, rebuilds, restocks completed, SKUs left).
//   - Limit reports each limiter decision.
//   - Handoff reports each delivery of a queued hand-off (package
//     handoff) as it ends: its lag from publish to record, whether its
//     gate hold had ended, its attempt, and whether it was
//     dead-lettered.
//
// The funcs are called synchronously: keep them fast and never block in
// them. Begin, End, Reclaim, Limit and Handoff run on the goroutine of the call
// they report; Batch on the goroutine of one call of the batch (the one
// that sent it, or the first still waiting for it), before any call of the
// batch returns. Events carry no user IDs and no order IDs; SKUs appear
// only in Correction, where an operator needs them.
//
// A hook that panics is not recovered: the panic unwinds the call that ran
// the hook, and memstock, redisstock and sqlstock hold no lock, slot or
// lane while a hook runs, so they stay usable and a batch's other calls
// get their own outcomes. Only a batch whose callers have all left (their
// contexts ended) is reported on the Store's own goroutine, where a panic
// ends the program.
//
// The OpenTelemetry adapter (module github.com/stockguard/stockguard/otelstock)
// turns an Observer into OTel metrics and spans.
package observe
