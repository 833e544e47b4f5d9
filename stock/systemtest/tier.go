package systemtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// tier wraps one node's gate or record: every call passes the hand-off
// point of the calling step (see ctl) before it reaches the tier.
type tier struct {
	name string // "gate" or "record"
	m    stock.Manager
}

// wrapGate returns a flow's gate behind the checker's hand-off points,
// with every interface of tiered.GateStore (its check of listings, a read
// before anything is written, has none).
func wrapGate(g tiered.GateStore) tiered.GateStore {
	t := &tier{name: "gate", m: g}
	return struct {
		stock.Manager
		stock.Reclaimer
		stock.OrderReader
		stock.HoldReverter
		stock.PartialReverter
		stock.HoldExtender
		tiered.ListingChecker
	}{t, t, t, t, t, t, g}
}

// wrap returns m behind the checker's hand-off points, implementing
// stock.Reclaimer, stock.OrderReader and stock.HoldLister exactly when m
// does (and stock.HoldReverter when m implements all four, as a
// tiered.RecordStore does; stock.PartialReverter and stock.HoldExtender
// too when m implements them besides those of a record, or besides
// stock.Reclaimer and stock.OrderReader as a gate does), so that code
// choosing by type assertion sees the same tier.
func wrap(name string, m stock.Manager) stock.Manager {
	t := &tier{name: name, m: m}
	_, rc := m.(stock.Reclaimer)
	_, rd := m.(stock.OrderReader)
	_, hl := m.(stock.HoldLister)
	_, hr := m.(stock.HoldReverter)
	_, pr := m.(stock.PartialReverter)
	_, he := m.(stock.HoldExtender)
	type (
		M  = stock.Manager
		RC = stock.Reclaimer
		RD = stock.OrderReader
		HL = stock.HoldLister
		HR = stock.HoldReverter
		PR = stock.PartialReverter
		HE = stock.HoldExtender
	)
	switch {
	case rc && rd && hl && hr && pr && he: // a record: sqlstock, memstock
		return struct {
			M
			RC
			RD
			HL
			HR
			PR
			HE
		}{t, t, t, t, t, t, t}
	case rc && rd && pr && he && !hl: // a gate: redisstock
		return struct {
			M
			RC
			RD
			PR
			HE
		}{t, t, t, t, t}
	case rc && rd && hl && hr:
		return struct {
			M
			RC
			RD
			HL
			HR
		}{t, t, t, t, t}
	case rc && rd && hl:
		return struct {
			M
			RC
			RD
			HL
		}{t, t, t, t}
	case rc && rd:
		return struct {
			M
			RC
			RD
		}{t, t, t}
	case rc && hl:
		return struct {
			M
			RC
			HL
		}{t, t, t}
	case rd && hl:
		return struct {
			M
			RD
			HL
		}{t, t, t}
	case rc:
		return struct {
			M
			RC
		}{t, t}
	case rd:
		return struct {
			M
			RD
		}{t, t}
	case hl:
		return struct {
			M
			HL
		}{t, t}
	}
	return struct{ M }{t}
}

// do runs call through the hand-off point. writes says whether a lost
// reply leaves the outcome unknown (a write) or is a plain failure (a read).
func (t *tier) do(ctx context.Context, method string, skus []string, writes bool, call func() error) error {
	c := ctlFrom(ctx)
	if c == nil {
		return call()
	}
	switch c.tierPoint(t.name, method) {
	case failBefore:
		return fmt.Errorf("systemtest: %s %s: %w", t.name, method, downErr())
	case refuse:
		return refusal(skus)
	case loseReply:
		_ = call()
		if writes {
			return fmt.Errorf("systemtest: %s %s: %w", t.name, method, errors.Join(stock.ErrUnknownOutcome, lostErr()))
		}
		return fmt.Errorf("systemtest: %s %s: %w", t.name, method, lostErr())
	}
	return call()
}

func (t *tier) PutOnSale(ctx context.Context, l stock.Listing) error {
	return t.do(ctx, "PutOnSale", []string{l.SKU}, true, func() error { return t.m.PutOnSale(ctx, l) })
}

func (t *tier) Restock(ctx context.Context, r stock.Restock) error {
	return t.do(ctx, "Restock", []string{r.SKU}, true, func() error { return t.m.Restock(ctx, r) })
}

func (t *tier) Deduct(ctx context.Context, o stock.Order) error {
	skus := make([]string, len(o.Items))
	for i, it := range o.Items {
		skus[i] = it.SKU
	}
	return t.do(ctx, "Deduct", skus, true, func() error { return t.m.Deduct(ctx, o) })
}

func (t *tier) Confirm(ctx context.Context, id string) error {
	return t.do(ctx, "Confirm", nil, true, func() error { return t.m.Confirm(ctx, id) })
}

func (t *tier) Revert(ctx context.Context, id string) error {
	return t.do(ctx, "Revert", nil, true, func() error { return t.m.Revert(ctx, id) })
}

func (t *tier) Available(ctx context.Context, sku string) (n int64, err error) {
	err = t.do(ctx, "Available", []string{sku}, false, func() (err error) { n, err = t.m.Available(ctx, sku); return err })
	return n, err
}

func (t *tier) Levels(ctx context.Context, sku string) (lv stock.Levels, err error) {
	err = t.do(ctx, "Levels", []string{sku}, false, func() (err error) { lv, err = t.m.Levels(ctx, sku); return err })
	return lv, err
}

func (t *tier) ReclaimExpired(ctx context.Context, limit int) (got []stock.Reclaimed, err error) {
	err = t.do(ctx, "ReclaimExpired", nil, true, func() (err error) {
		got, err = t.m.(stock.Reclaimer).ReclaimExpired(ctx, limit)
		return err
	})
	if errors.Is(err, errInjected) {
		got = nil // a lost reply loses the report too
	}
	return got, err
}

func (t *tier) Orders(ctx context.Context, ids []string) (got []stock.OrderInfo, err error) {
	err = t.do(ctx, "Orders", nil, false, func() (err error) {
		got, err = t.m.(stock.OrderReader).Orders(ctx, ids)
		return err
	})
	if err != nil {
		got = nil
	}
	return got, err
}

func (t *tier) UserUnits(ctx context.Context, sku, userID string) (got int64, err error) {
	err = t.do(ctx, "UserUnits", nil, false, func() (err error) {
		got, err = t.m.(stock.OrderReader).UserUnits(ctx, sku, userID)
		return err
	})
	return got, err
}

func (t *tier) HeldBefore(ctx context.Context, at time.Time, limit int) (got []stock.OrderInfo, err error) {
	err = t.do(ctx, "HeldBefore", nil, false, func() (err error) {
		got, err = t.m.(stock.HoldLister).HeldBefore(ctx, at, limit)
		return err
	})
	if err != nil {
		got = nil
	}
	return got, err
}

func (t *tier) RevertHeld(ctx context.Context, id string) (got stock.State, err error) {
	err = t.do(ctx, "RevertHeld", nil, true, func() (err error) {
		got, err = t.m.(stock.HoldReverter).RevertHeld(ctx, id)
		return err
	})
	if err != nil {
		got = stock.StateUnknown
	}
	return got, err
}

func (t *tier) RevertItems(ctx context.Context, r stock.Return) error {
	skus := make([]string, len(r.Items))
	for i, it := range r.Items {
		skus[i] = it.SKU
	}
	return t.do(ctx, "RevertItems", skus, true, func() error { return t.m.(stock.PartialReverter).RevertItems(ctx, r) })
}

func (t *tier) ExtendHold(ctx context.Context, id string, deadline time.Time) error {
	return t.do(ctx, "ExtendHold", nil, true, func() error { return t.m.(stock.HoldExtender).ExtendHold(ctx, id, deadline) })
}
