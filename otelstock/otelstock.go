package otelstock

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/observe"
)

// ScopeName is the instrumentation scope of the Adapter's meter and tracer.
const ScopeName = "github.com/stockguard/stockguard/otelstock"

// Config configures an Adapter. The zero value uses OpenTelemetry's global
// providers (otel.GetMeterProvider, otel.GetTracerProvider).
type Config struct {
	// MeterProvider makes the metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the spans; nil means otel.GetTracerProvider().
	// Give a noop provider (go.opentelemetry.io/otel/trace/noop) for
	// metrics alone.
	TracerProvider trace.TracerProvider
	// Attributes are added to every metric point and span (a node name, a
	// shop): keep them few and of low cardinality.
	Attributes []attribute.KeyValue
	// DurationBuckets are the bounds, in seconds, of the duration
	// histograms; nil means DefaultDurationBuckets.
	DurationBuckets []float64
	// BusinessErrors, if set, gives a span whose call ended in a business
	// outcome (sold out, limit reached, unknown SKU or order, conflict,
	// expired, closed, invalid) the status Error too. By default only
	// infrastructure failures do: a flash sale answers "sold out" far more
	// often than it sells.
	BusinessErrors bool
}

// DefaultDurationBuckets are the duration histograms' bounds in seconds:
// from 50µs (a batched Redis call) to 10s (a lock wait that ran out).
var DefaultDurationBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// batchSizeBuckets fit redisstock's and sqlstock's default batch sizes (64)
// and their largest (256).
var batchSizeBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}

// Adapter reports the events of an observe.Observer as OpenTelemetry
// metrics and spans. Make one with New; it is safe for concurrent use.
type Adapter struct {
	cfg    Config
	meter  metric.Meter
	tracer trace.Tracer
	spans  bool // false for a noop TracerProvider: Begin unset, no span touched
	base   []attribute.KeyValue

	calls         metric.Int64Counter
	callDuration  metric.Float64Histogram
	orders        metric.Int64Counter
	orderDuration metric.Float64Histogram

	batchSize     metric.Int64Histogram
	batchWait     metric.Float64Histogram
	batchDuration metric.Float64Histogram

	reclaimPasses  metric.Int64Counter
	reclaimOrders  metric.Int64Counter
	reclaimUnits   metric.Int64Counter
	reclaimLag     metric.Float64Gauge
	breakerStatus  metric.Int64Gauge
	breakerShare   metric.Float64Gauge
	breakerChanges metric.Int64Counter
	corrections    metric.Int64Counter
	correctedUnits metric.Int64Counter
	decisions      metric.Int64Counter
	limitDuration  metric.Float64Histogram
	handoffs       metric.Int64Counter
	handoffLag     metric.Float64Histogram
	handoffExpired metric.Int64Counter

	// sets caches the attribute sets of the hot paths, keyed by the
	// values that make them (a setKey), so a call allocates none.
	sets sync.Map // setKey -> metric.MeasurementOption
}

// New returns an Adapter that makes its instruments with cfg's providers.
// It fails only if the MeterProvider refuses an instrument.
func New(cfg Config) (*Adapter, error) {
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.DurationBuckets == nil {
		cfg.DurationBuckets = DefaultDurationBuckets
	}
	a := &Adapter{
		cfg:    cfg,
		meter:  cfg.MeterProvider.Meter(ScopeName),
		tracer: cfg.TracerProvider.Tracer(ScopeName),
		base:   append([]attribute.KeyValue(nil), cfg.Attributes...),
	}
	_, isNoop := cfg.TracerProvider.(noop.TracerProvider)
	a.spans = !isNoop
	if err := a.instruments(); err != nil {
		return nil, err
	}
	return a, nil
}

// instruments makes every synchronous instrument.
func (a *Adapter) instruments() error {
	m, b := a.meter, a.cfg.DurationBuckets
	var errs [21]error
	a.calls, errs[0] = m.Int64Counter("stockguard.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls of a stock.Manager method, by component, operation and outcome."))
	a.callDuration, errs[1] = m.Float64Histogram("stockguard.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of stock.Manager calls."), metric.WithExplicitBucketBoundaries(b...))
	a.batchSize, errs[2] = m.Int64Histogram("stockguard.batch.size", metric.WithUnit("{call}"),
		metric.WithDescription("Calls sent together in one Redis script call or one SQL transaction."),
		metric.WithExplicitBucketBoundaries(batchSizeBuckets...))
	a.batchWait, errs[3] = m.Float64Histogram("stockguard.batch.wait", metric.WithUnit("s"),
		metric.WithDescription("How long a batch's oldest call waited before the batch was sent."),
		metric.WithExplicitBucketBoundaries(b...))
	a.batchDuration, errs[4] = m.Float64Histogram("stockguard.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a batch took once sent."), metric.WithExplicitBucketBoundaries(b...))
	a.reclaimPasses, errs[5] = m.Int64Counter("stockguard.reclaim.passes", metric.WithUnit("{pass}"),
		metric.WithDescription("Reclaim passes, by outcome."))
	a.reclaimOrders, errs[6] = m.Int64Counter("stockguard.reclaim.orders", metric.WithUnit("{order}"),
		metric.WithDescription("Orders whose unpaid holds a reclaim pass returned."))
	a.reclaimUnits, errs[7] = m.Int64Counter("stockguard.reclaim.units", metric.WithUnit("{unit}"),
		metric.WithDescription("Units of unpaid holds returned by reclaim passes."))
	a.reclaimLag, errs[8] = m.Float64Gauge("stockguard.reclaim.lag", metric.WithUnit("s"),
		metric.WithDescription("How long past its deadline the oldest hold the last reclaim pass found due was."))
	a.breakerStatus, errs[9] = m.Int64Gauge("stockguard.breaker.status", metric.WithUnit("{state}"),
		metric.WithDescription("1 for the state a degrade breaker is in, 0 for each other state, from the breaker's start."))
	a.breakerShare, errs[10] = m.Float64Gauge("stockguard.breaker.share", metric.WithUnit("1"),
		metric.WithDescription("The share of traffic a degrade breaker sends to the primary."))
	a.breakerChanges, errs[11] = m.Int64Counter("stockguard.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Breaker state changes and ramp steps."))
	a.corrections, errs[12] = m.Int64Counter("stockguard.reconcile.corrections", metric.WithUnit("{correction}"),
		metric.WithDescription("Reconcile findings reported, by action."))
	a.correctedUnits, errs[13] = m.Int64Counter("stockguard.reconcile.units", metric.WithUnit("{unit}"),
		metric.WithDescription("Units of drift reconcile found (the size of each finding's change, and the units of the holds it ended at Redis), by action."))
	a.decisions, errs[14] = m.Int64Counter("stockguard.limiter.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Limiter decisions, by limiter and decision (allowed, refused, error)."))
	a.limitDuration, errs[15] = m.Float64Histogram("stockguard.limiter.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of limiter decisions."), metric.WithExplicitBucketBoundaries(b...))
	a.orders, errs[16] = m.Int64Counter("stockguard.orders", metric.WithUnit("{call}"),
		metric.WithDescription("Order operations the application called, counted once at the outermost layer, by operation and outcome."))
	a.orderDuration, errs[17] = m.Float64Histogram("stockguard.order.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the order operations the application called, as it saw them."),
		metric.WithExplicitBucketBoundaries(b...))
	a.handoffs, errs[18] = m.Int64Counter("stockguard.handoff.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Hand-off deliveries a consumer ended, by Settle's outcome (\"dead_lettered\" for those dead-lettered)."))
	a.handoffLag, errs[19] = m.Float64Histogram("stockguard.handoff.lag", metric.WithUnit("s"),
		metric.WithDescription("Hand-off lag: from a message's publish to the end of its settling."),
		metric.WithExplicitBucketBoundaries(b...))
	a.handoffExpired, errs[20] = m.Int64Counter("stockguard.handoff.expired", metric.WithUnit("{message}"),
		metric.WithDescription("Hand-off messages whose order's gate hold had ended (expired in the queue)."))
	return errors.Join(errs[:]...)
}

// Observer returns the observe.Observer to put in every part's Config. It
// sets every hook, except Begin when the TracerProvider is the noop one
// (then calls run in their own context, and cost a little less).
func (a *Adapter) Observer() observe.Observer {
	begin := a.begin
	if !a.spans {
		begin = nil
	}
	return observe.Observer{
		Begin:      begin,
		End:        a.end,
		Batch:      a.batch,
		Reclaim:    a.reclaim,
		Breaker:    a.breaker,
		Correction: a.correction,
		Limit:      a.limit,
		Handoff:    a.handoff,
	}
}

// setKey identifies an attribute set of the hot paths: kind says which
// instrument family it belongs to, a, b and c are its values.
type setKey struct {
	kind    uint8
	a, b, c string
}

const (
	kindCall uint8 = iota
	kindOrder
	kindBatch
	kindBatchOutcome
	kindReclaim
	kindReclaimPass
	kindLimit
	kindLimitDecision
	kindHandoff
	kindSpan // a spanStart, not a measurement option
)

// opt returns the cached measurement option of k, making it on first use.
func (a *Adapter) opt(k setKey) metric.MeasurementOption {
	if o, ok := a.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := a.with(k.attrs()...)
	a.sets.Store(k, o)
	return o
}

// attrs are the attributes k stands for.
func (k setKey) attrs() []attribute.KeyValue {
	switch k.kind {
	case kindCall, kindBatchOutcome:
		return []attribute.KeyValue{KeyComponent.String(k.a), KeyOperation.String(k.b), KeyOutcome.String(k.c)}
	case kindOrder:
		return []attribute.KeyValue{KeyOperation.String(k.b), KeyOutcome.String(k.c)}
	case kindBatch:
		return []attribute.KeyValue{KeyComponent.String(k.a), KeyOperation.String(k.b)}
	case kindReclaim:
		return []attribute.KeyValue{KeyComponent.String(k.a)}
	case kindReclaimPass:
		return []attribute.KeyValue{KeyComponent.String(k.a), KeyOutcome.String(k.b)}
	case kindLimit:
		return []attribute.KeyValue{KeyLimiter.String(k.a)}
	case kindHandoff:
		if k.a == "" {
			return nil
		}
		return []attribute.KeyValue{KeyOutcome.String(k.a)}
	default: // kindLimitDecision: b the decision, c the error's class
		if k.c == "" {
			return []attribute.KeyValue{KeyLimiter.String(k.a), KeyDecision.String(k.b)}
		}
		return []attribute.KeyValue{KeyLimiter.String(k.a), KeyDecision.String(k.b), KeyErrorType.String(k.c)}
	}
}

// with returns a measurement option of attrs plus the Config's attributes,
// for the rare events (no cache).
func (a *Adapter) with(attrs ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(attrs, a.base...)...))
}
