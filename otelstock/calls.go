package otelstock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stockguard/stockguard/observe"
)

// begin starts the call's span; the context it returns carries it, so the
// calls the component makes on the call's behalf are its children.
func (a *Adapter) begin(ctx context.Context, c observe.Call) context.Context {
	k := setKey{kind: kindSpan, a: c.Component, b: string(c.Op)}
	st, ok := a.sets.Load(k)
	if !ok {
		attrs := append([]attribute.KeyValue{KeyComponent.String(c.Component), KeyOperation.String(string(c.Op))}, a.base...)
		st = spanStart{name: c.Component + "." + string(c.Op),
			attrs: trace.WithAttributes(attrs...), kind: trace.WithSpanKind(trace.SpanKindInternal)}
		a.sets.Store(k, st)
	}
	s := st.(spanStart)
	ctx, span := a.tracer.Start(ctx, s.name, s.kind, s.attrs, trace.WithTimestamp(c.Start))
	if span.IsRecording() {
		span.SetAttributes(KeyItems.Int(c.Items))
	}
	return ctx
}

// orderOp reports whether op acts on an order (stockguard.orders counts
// those alone): Deduct, Confirm, Revert, RevertItems and ExtendHold.
func orderOp(op observe.Op) bool {
	switch op {
	case observe.OpDeduct, observe.OpConfirm, observe.OpRevert, observe.OpRevertItems, observe.OpExtendHold:
		return true
	}
	return false
}

// spanStart is what every span of one component and operation starts with.
type spanStart struct {
	name  string
	attrs trace.SpanStartEventOption
	kind  trace.SpanStartOption
}

// end counts the call, records its duration and ends its span.
func (a *Adapter) end(ctx context.Context, c observe.Call, r observe.Result) {
	outcome := r.Outcome.String()
	opt := a.opt(setKey{kindCall, c.Component, string(c.Op), outcome})
	a.calls.Add(ctx, 1, opt)
	a.callDuration.Record(ctx, r.Duration.Seconds(), opt)
	if !c.Nested && orderOp(c.Op) {
		oopt := a.opt(setKey{kind: kindOrder, b: string(c.Op), c: outcome})
		a.orders.Add(ctx, 1, oopt)
		a.orderDuration.Record(ctx, r.Duration.Seconds(), oopt)
	}

	if !a.spans {
		return // no Begin: the span in ctx, if any, is the caller's
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(KeyOutcome.String(outcome))
	if r.Outcome != observe.OK {
		a.fail(span, r.Outcome)
	}
	span.End(trace.WithTimestamp(c.Start.Add(r.Duration)))
}

// fail marks span as ended in an outcome of class o: error.type always,
// and the status Error, described by the class, for an infrastructure
// failure (and a business outcome when the Config asks). It takes the
// class, not the error: an error's text may name an order or a user, and
// no span carries either.
func (a *Adapter) fail(span trace.Span, o observe.Outcome) {
	class := o.String()
	span.SetAttributes(KeyErrorType.String(class))
	if o.Business() && !a.cfg.BusinessErrors {
		return
	}
	span.SetStatus(codes.Error, class)
}

// batch records a batch's size, wait and duration, and, under a traced
// call, a span for it: the child of the oldest call's span, whose context
// the batch carries.
func (a *Adapter) batch(ctx context.Context, b observe.Batch) {
	op := string(b.Op)
	opt := a.opt(setKey{kindBatch, b.Component, op, ""})
	outcome := observe.Classify(b.Err)
	oopt := a.opt(setKey{kindBatchOutcome, b.Component, op, outcome.String()})
	a.batchSize.Record(ctx, int64(b.Size), opt)
	a.batchWait.Record(ctx, b.Wait.Seconds(), opt)
	a.batchDuration.Record(ctx, b.Duration.Seconds(), oopt)

	if !a.spans || !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return
	}
	end := time.Now()
	_, span := a.tracer.Start(ctx, b.Component+".batch",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(end.Add(-b.Duration)),
		trace.WithAttributes(append([]attribute.KeyValue{KeyComponent.String(b.Component), KeyOperation.String(op),
			KeyBatchSize.Int(b.Size), KeyBatchWait.Float64(b.Wait.Seconds())}, a.base...)...))
	if b.Err != nil {
		a.fail(span, outcome)
	}
	span.End(trace.WithTimestamp(end))
}
