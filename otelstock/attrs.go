package otelstock

import "go.opentelemetry.io/otel/attribute"

// The attribute keys the Adapter sets.
const (
	// KeyComponent is the package that ran a call: "memstock",
	// "redisstock", "sqlstock", "tiered" or "degrade".
	KeyComponent = attribute.Key("stockguard.component")
	// KeyOperation is the call's operation: "deduct", "confirm", "revert",
	// "restock", "put_on_sale", "reclaim" (observe.Op).
	KeyOperation = attribute.Key("stockguard.operation")
	// KeyOutcome is the outcome class of a call, batch or reclaim pass (observe.Outcome's names: "ok", "sold_out", ...).
	KeyOutcome = attribute.Key("stockguard.outcome")
	// KeyItems is the number of order lines of a call (spans only).
	KeyItems = attribute.Key("stockguard.items")
	// KeyBatchSize and KeyBatchWait are a batch span's size and its oldest
	// call's wait in seconds.
	KeyBatchSize = attribute.Key("stockguard.batch.size")
	KeyBatchWait = attribute.Key("stockguard.batch.wait")
	// KeyBreaker is a breaker's name: a SKU for per-SKU breakers, "" for
	// the shared one.
	KeyBreaker = attribute.Key("stockguard.breaker")
	// KeyBreakerFrom and KeyBreakerTo are a transition's states.
	KeyBreakerFrom = attribute.Key("stockguard.breaker.from")
	KeyBreakerTo   = attribute.Key("stockguard.breaker.to")
	// KeyBreakerState is the state (BreakerStates) a point of
	// stockguard.breaker.status is about.
	KeyBreakerState = attribute.Key("stockguard.breaker.state")
	// KeyAction is a reconcile finding's action ("corrected", "rebuilt",
	// "restocked", "left", ...).
	KeyAction = attribute.Key("stockguard.reconcile.action")
	// KeyLimiter is "local", "redis" or "composite"; KeyDecision what the
	// limiter decided: "allowed", "refused", or "error" when it could not
	// decide (error.type then names the error's class).
	KeyLimiter  = attribute.Key("stockguard.limiter")
	KeyDecision = attribute.Key("stockguard.limiter.decision")
	// KeyStore names the Manager a Levels registration reads, KeySKU the
	// SKU.
	KeyStore = attribute.Key("stockguard.store")
	KeySKU   = attribute.Key("stockguard.sku")
	// KeyErrorType is OpenTelemetry's error.type, set on spans that ended
	// in an error and on limiter decisions that could not be made: the
	// outcome's name.
	KeyErrorType = attribute.Key("error.type")
)
