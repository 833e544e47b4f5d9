package otelstock

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stockguard/stockguard/stock"
)

// LevelReader is what RegisterLevels needs of a store: every
// stock.Manager is one.
type LevelReader interface {
	Levels(ctx context.Context, sku string) (stock.Levels, error)
}

// Levels names the SKUs of a store whose unit counts RegisterLevels
// reports.
type Levels struct {
	// Source is read at each collection; required.
	Source LevelReader
	// Store is the stockguard.store attribute that tells several sources
	// apart, e.g. "gate" and "record"; "" is allowed.
	Store string
	// SKUs are the SKUs read, each one a stockguard.sku attribute value:
	// list the SKUs you want to watch, not a whole catalogue.
	SKUs []string
	// Timeout bounds the reads of one collection; default 1s.
	Timeout time.Duration
}

// RegisterLevels reports the available, held and sold units of l's SKUs as
// the gauges stockguard.stock.available, stockguard.stock.held and
// stockguard.stock.sold, read from l.Source at each collection (one Levels
// call per SKU). A SKU whose read fails is left out of that collection, so
// a store that is down shows as a gap, not as zero. Unregister the
// returned Registration to stop.
func (a *Adapter) RegisterLevels(l Levels) (metric.Registration, error) {
	if l.Source == nil {
		return nil, errors.New("otelstock: RegisterLevels: no Source")
	}
	if l.Timeout <= 0 {
		l.Timeout = time.Second
	}
	skus := slices.Clone(l.SKUs)
	opts := make([]metric.ObserveOption, len(skus))
	for i, sku := range skus {
		opts[i] = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{KeyStore.String(l.Store), KeySKU.String(sku)}, a.base...)...))
	}
	m := a.meter
	var errs [3]error
	var avail, held, sold metric.Int64ObservableGauge
	avail, errs[0] = m.Int64ObservableGauge("stockguard.stock.available", metric.WithUnit("{unit}"),
		metric.WithDescription("Units of a SKU that can be deducted now, as a store sees them."))
	held, errs[1] = m.Int64ObservableGauge("stockguard.stock.held", metric.WithUnit("{unit}"),
		metric.WithDescription("Units of a SKU held by orders neither confirmed nor returned, as a store sees them."))
	sold, errs[2] = m.Int64ObservableGauge("stockguard.stock.sold", metric.WithUnit("{unit}"),
		metric.WithDescription("Units of a SKU confirmed sold, as a store sees them."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, l.Timeout)
		defer cancel()
		for i, sku := range skus {
			lv, err := l.Source.Levels(ctx, sku)
			if err != nil {
				continue
			}
			o.ObserveInt64(avail, lv.Available, opts[i])
			o.ObserveInt64(held, lv.Held, opts[i])
			o.ObserveInt64(sold, lv.Sold, opts[i])
		}
		return nil
	}, avail, held, sold)
}
