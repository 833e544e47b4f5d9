package sqlstock

import (
	"context"
	"slices"

	"github.com/stockguard/stockguard/stock"
)

// ReclaimExpired implements stock.Reclaimer. It reads up to limit due
// held lines through the ledger's (state, deadline) index, so a pass costs
// in proportion to what is due, not to the ledger's size. Then, in one
// transaction, each of their orders is moved from held to expired by a
// conditional UPDATE (RowsAffected says whether this reclaimer won it),
// and the won units go back with one UPDATE per SKU, in sorted order.
// Several reclaimers may run at once: each order is returned by exactly
// one. An order's lines are reclaimed together, so the result may hold
// more than limit lines when an order has lines beyond the limit.
//
// A COMMIT whose outcome is unknown is reported as stock.ErrUnknownOutcome
// at once, never run again (a second run would report nothing for the
// orders the first may have returned); the next pass returns whatever is
// still due.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.nowMS()
	ids, err := s.dueOrders(ctx, now, limit)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	var out []stock.Reclaimed
	err = s.retry(ctx, "reclaim", false, func() error {
		out = out[:0]
		return s.inTx(ctx, func(q querier) error {
			totals := map[string]int64{}
			for _, id := range ids {
				n, err := affected(q.ExecContext(ctx, s.q.expire, id, now))
				if err != nil {
					return err
				}
				if n == 0 {
					continue // confirmed, reverted or reclaimed by another
				}
				lines, err := s.readOrder(ctx, q, s.q.readOrder, id)
				if err != nil {
					return err
				}
				for _, l := range lines {
					out = append(out, stock.Reclaimed{OrderID: id, UserID: l.user, SKU: l.sku, Qty: l.qty})
					totals[l.sku] += l.qty
				}
			}
			skus := make([]string, 0, len(totals))
			for sku := range totals {
				skus = append(skus, sku)
			}
			slices.Sort(skus)
			for _, sku := range skus {
				if _, err := q.ExecContext(ctx, s.q.release, totals[sku], totals[sku], sku); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dueOrders returns the sorted IDs of the orders of up to limit held lines
// whose deadline is at or before now, earliest deadline first.
func (s *Store) dueOrders(ctx context.Context, now int64, limit int) ([]string, error) {
	rs, err := s.db.QueryContext(ctx, s.q.due, now, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var ids []string
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
