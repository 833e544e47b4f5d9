package sqlstock

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/stock"
)

// HeldBefore implements stock.HoldLister: up to limit orders that are held
// with a deadline at or before t, earliest deadline first (ties by order
// ID), read in one statement through the ledger's (state, deadline_ms)
// index. Like Levels it includes holds past their deadline that no
// reclaimer has returned yet; that is what it is for. Items are the
// order's lines as ordered, Returned what partial reverts gave back.
func (s *Store) HeldBefore(ctx context.Context, t time.Time, limit int) ([]stock.OrderInfo, error) {
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return nil, err
	}
	rs, err := s.db.QueryContext(ctx, s.q.heldBefore, canon.Millis(t), limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var (
		out      []stock.OrderInfo
		returned map[string]int64 // of the last order
	)
	for rs.Next() {
		var (
			id, sku, user string
			qty, ret, dl  int64
		)
		if err := rs.Scan(&id, &sku, &qty, &ret, &user, &dl); err != nil {
			return nil, err
		}
		if n := len(out); n == 0 || out[n-1].ID != id {
			if n > 0 {
				out[n-1].Returned = canon.Returned(returned)
			}
			returned = nil
			out = append(out, stock.OrderInfo{ID: id, UserID: user, State: stock.StateHeld, Deadline: time.UnixMilli(dl)})
		}
		o := &out[len(out)-1]
		o.Items = append(o.Items, stock.Item{SKU: sku, Qty: qty})
		if ret > 0 {
			if returned == nil {
				returned = map[string]int64{}
			}
			returned[sku] = ret
		}
	}
	if n := len(out); n > 0 {
		out[n-1].Returned = canon.Returned(returned)
	}
	return out, rs.Err()
}
