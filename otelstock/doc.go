// Package otelstock turns stockguard's observation hook (package observe)
// into OpenTelemetry metrics and spans.
//
// It lives in a module of its own, github.com/stockguard/stockguard/otelstock,
// so that a program importing stockguard's core never pulls in
// OpenTelemetry. Wire it by passing one Adapter's Observer into the Config
// of every part you run:
//
//	a, err := otelstock.New(otelstock.Config{MeterProvider: mp, TracerProvider: tp})
//	obs := a.Observer()
//	gate, _ := redisstock.New(rdb, redisstock.Config{Observer: obs})
//	record, _ := sqlstock.New(db, sqlstock.Config{Observer: obs})
//	flow := tiered.New(gate, record, tiered.Config{Observer: obs})
//	_, _ = a.RegisterLevels(otelstock.Levels{Source: record, Store: "record", SKUs: skus})
//
// # Metrics
//
// Names are dotted and lower-case, units UCUM, as OpenTelemetry's semantic
// conventions ask; the Prometheus exporter turns stockguard.call.duration
// ("s") into stockguard_call_duration_seconds and stockguard.calls into
// stockguard_calls_total.
//
//	stockguard.orders                 counter    {call}        operation, outcome
//	stockguard.order.duration         histogram  s             operation, outcome
//	stockguard.calls                  counter    {call}        component, operation, outcome
//	stockguard.call.duration          histogram  s             component, operation, outcome
//	stockguard.batch.size             histogram  {call}        component, operation
//	stockguard.batch.wait             histogram  s             component, operation
//	stockguard.batch.duration         histogram  s             component, operation, outcome
//	stockguard.reclaim.passes         counter    {pass}        component, outcome
//	stockguard.reclaim.orders         counter    {order}       component
//	stockguard.reclaim.units          counter    {unit}        component
//	stockguard.reclaim.lag            gauge      s             component
//	stockguard.breaker.status         gauge      {state}       breaker, breaker.state
//	stockguard.breaker.share          gauge      1             breaker
//	stockguard.breaker.transitions    counter    {transition}  breaker, from, to
//	stockguard.reconcile.corrections  counter    {correction}  action
//	stockguard.reconcile.units        counter    {unit}        action
//	stockguard.limiter.decisions      counter    {decision}    limiter, limiter.decision, error.type
//	stockguard.limiter.duration       histogram  s             limiter
//	stockguard.handoff.messages       counter    {message}     outcome
//	stockguard.handoff.lag            histogram  s
//	stockguard.handoff.expired        counter    {message}
//	stockguard.stock.available        gauge      {unit}        store, sku
//	stockguard.stock.held             gauge      {unit}        store, sku
//	stockguard.stock.sold             gauge      {unit}        store, sku
//
// Every attribute is namespaced: stockguard.component, stockguard.operation,
// stockguard.outcome (observe.Outcome's names: "ok", "sold_out", ...),
// stockguard.breaker, stockguard.breaker.state, stockguard.breaker.from,
// stockguard.breaker.to, stockguard.reconcile.action, stockguard.limiter,
// stockguard.limiter.decision, stockguard.store and stockguard.sku, besides
// OpenTelemetry's error.type. Their values come from small fixed
// sets, except stockguard.breaker (a SKU for per-SKU breakers, "" for the
// shared one) and stockguard.sku, which name only the SKUs you list in
// RegisterLevels. No metric carries a user ID or an order ID, nor a SKU
// outside those two.
//
// stockguard.orders and stockguard.order.duration count the order
// operations (deduct, confirm, revert, revert_items, extend_hold) the
// application called, once each, at the outermost layer: a call made in
// the context of another tracked call (observe.Call.Nested) is left out.
// Sum them for an order rate; stockguard.calls counts a call at every
// layer it passes through (a Shop's Deduct as degrade, tiered, redisstock
// and sqlstock), to read each layer's latency and outcomes.
//
// stockguard.breaker.status has one series per breaker and state
// (BreakerStates: "primary", "degraded", "recalibrating", "ramping"): 1
// for the state the breaker is in, 0 for the others. degrade reports each
// breaker as it is made (the shared one in degrade.New), so the series
// exist before any incident. The reclaim lag is that of the last pass that
// did not fail: how long past its deadline the oldest hold the pass found
// due was, 0 when none was.
//
// stockguard.limiter.decision is "allowed", "refused", or "error" when the
// limiter could not decide (its error.type is then the error's class).
//
// stockguard.reconcile.corrections counts reconcile's findings by action;
// stockguard.reconcile.units adds, per finding, the size of its change and
// the units of the holds the pass ended at Redis (observe.Correction.Ended:
// orders the database had returned), so an "ended" finding counts those.
//
// The hand-off metrics come from a handoff.Consumer, once per delivery it
// ended: stockguard.handoff.messages by Settle's outcome ("ok", "expired",
// ..., or "dead_lettered"), its lag from publish to record, and
// stockguard.handoff.expired for a message whose order's gate hold had
// ended (expired in the queue: settled all the same, its hold returned;
// see observe.Handoff.Expired).
//
// # Spans
//
// Each Manager call (Deduct, Confirm, Revert, Restock, PutOnSale, and
// ReclaimExpired as "reclaim") is a span named "<component>.<operation>",
// e.g. "tiered.deduct", with the attributes stockguard.component,
// stockguard.operation, stockguard.items (the order's lines) and, at its
// end, stockguard.outcome. With a noop TracerProvider the Adapter makes no
// spans and leaves Observer.Begin unset. The calls a
// tiered or degrade Manager makes to its tiers run in the span's context,
// so they are its children. A redisstock batch or a sqlstock group is a
// span "<component>.batch" with stockguard.batch.size and
// stockguard.batch.wait, the child of the span of the oldest call in it
// (whose context the batch carries). A call or batch that ends in an error
// sets error.type to its outcome class; an infrastructure failure (unknown
// outcome, contention, unavailable, canceled, any other error) also sets
// the span's status to Error, described by that class, and a business
// outcome (sold out, limit, ...) leaves the status unset unless
// Config.BusinessErrors says otherwise. Spans carry no user or order IDs:
// no span, event or metric point carries an error's text (which may name
// either), only its class; the errors of breaker changes, reconcile
// findings and limiter decisions are counted by class or not at all.
//
// An Adapter is safe for concurrent use, and its Observer may be shared by
// every part of a program.
package otelstock
