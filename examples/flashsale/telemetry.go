package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/otelstock"
)

// telemetry is -metrics: the library's OpenTelemetry adapter on a meter
// provider read by OpenTelemetry's Prometheus exporter, served on /metrics
// while the sale runs. Without -metrics it is off: its Observer is the zero
// value and it serves nothing.
type telemetry struct {
	adapter *otelstock.Adapter
	mp      *sdkmetric.MeterProvider
	srv     *http.Server
	addr    string // where /metrics is served
	regs    []metric.Registration
}

// startTelemetry listens on cfg.metricsAddr and serves /metrics, or
// returns an off telemetry when the flag is not set. It tells log the
// address.
func startTelemetry(cfg config, log io.Writer) (*telemetry, error) {
	t := &telemetry{}
	if cfg.metricsAddr == "" {
		return t, nil
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	// Metrics only: the sale has no trace backend to send spans to.
	if t.adapter, err = otelstock.New(otelstock.Config{MeterProvider: t.mp, TracerProvider: noop.NewTracerProvider()}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("-metrics %s: %w", cfg.metricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	t.addr = ln.Addr().String()
	go func() { _ = t.srv.Serve(ln) }()
	fmt.Fprintf(log, "flashsale: metrics on http://%s/metrics\n", t.addr)
	return t, nil
}

// observer is what every part of the sale reports to.
func (t *telemetry) observer() observe.Observer {
	if t.adapter == nil {
		return observe.Observer{}
	}
	return t.adapter.Observer()
}

// watch adds the sale's own gauges once it is built: both tiers' levels of
// every SKU, and the queue's depth.
func (t *telemetry) watch(sys *system, q *queue, skus []string) error {
	if t.adapter == nil {
		return nil
	}
	var errs []error
	for _, l := range []otelstock.Levels{
		{Source: sys.gate, Store: "gate", SKUs: skus, Timeout: 200 * time.Millisecond},
		{Source: sys.record, Store: "record", SKUs: skus, Timeout: 200 * time.Millisecond},
	} {
		r, err := t.adapter.RegisterLevels(l)
		errs = append(errs, err)
		if err == nil {
			t.regs = append(t.regs, r)
		}
	}
	m := t.mp.Meter("github.com/stockguard/stockguard/examples/flashsale")
	_, err := m.Int64ObservableGauge("flashsale.queue.depth", metric.WithUnit("{message}"),
		metric.WithDescription("Hand-offs published to the queue and not yet acknowledged."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(q.inFlight())
			return nil
		}))
	return errors.Join(append(errs, err)...)
}

// close stops serving and reading the stores.
func (t *telemetry) close() {
	if t.srv == nil {
		return
	}
	for _, r := range t.regs {
		_ = r.Unregister()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
	_ = t.mp.Shutdown(ctx)
}
