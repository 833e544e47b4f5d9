package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/stock"
)

var _ stock.OrderReader = (*Store)(nil)

// readBatch is how many IDs or SKUs one statement of the read methods
// (Orders, Snapshot and the View's reads) names.
const readBatch = 1000

// readBatches splits keys (order IDs or SKUs), each named once however
// often keys repeats it, into the batches of one statement each, so no
// row is read by two statements.
func readBatches(keys []string) [][]string {
	seen := make(map[string]bool, len(keys))
	distinct := make([]string, 0, len(keys))
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			distinct = append(distinct, k)
		}
	}
	var out [][]string
	for start := 0; start < len(distinct); start += readBatch {
		out = append(out, distinct[start:min(start+readBatch, len(distinct))])
	}
	return out
}

// UserUnits implements stock.OrderReader: the units of the user's held and
// confirmed ledger lines of sku (less what partial reverts gave back),
// read with the SKU's row in one statement.
func (s *Store) UserUnits(ctx context.Context, sku, userID string) (int64, error) {
	if err := stock.ValidateID("sku", sku); err != nil {
		return 0, err
	}
	if err := stock.ValidateID("userID", userID); err != nil {
		return 0, err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return 0, err
	}
	q := s.q.sql("SELECT COALESCE((SELECT SUM(qty - returned) FROM {L} WHERE sku = ? AND user_id = ? AND state IN (1, 2)), 0)" +
		" FROM {T} WHERE {sku} = ?")
	var units int64
	err := s.db.QueryRowContext(ctx, q, sku, userID, sku).Scan(&units)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	}
	return units, err
}

// Orders implements stock.OrderReader: the ledger's view of each order, in
// input order (an ID given twice is read once and answered twice), in one
// statement per 1000 distinct IDs. The lines of an order always share a state;
// Deadline is the latest deadline of its lines. Items are the lines as
// ordered, Returned what partial reverts gave back of them. Its wait for
// a pool connection and the server ends within Config.LockWait, as a
// write's does: past it the answer is a *ContentionError.
func (s *Store) Orders(ctx context.Context, ids []string) (out []stock.OrderInfo, err error) {
	err = s.read(ctx, "orders", func(ctx context.Context) (err error) {
		out, err = s.orders(ctx, s.db, ids)
		return err
	})
	return out, err
}

func (s *Store) orders(ctx context.Context, q querier, ids []string) ([]stock.OrderInfo, error) {
	for i, id := range ids {
		if err := stock.ValidateID("ids["+strconv.Itoa(i)+"]", id); err != nil {
			return nil, err
		}
	}
	if err := s.ready(ctx, s.db); err != nil { // a View's reads find it known
		return nil, err
	}
	found := make(map[string]*stock.OrderInfo, len(ids))
	returned := map[string]map[string]int64{}
	for _, batch := range readBatches(ids) {
		if err := s.readOrders(ctx, q, batch, found, returned); err != nil {
			return nil, err
		}
	}
	out := make([]stock.OrderInfo, len(ids))
	for i, id := range ids {
		if o := found[id]; o != nil {
			out[i] = *o
			out[i].Returned = canon.Returned(returned[id])
		} else {
			out[i] = stock.OrderInfo{ID: id}
		}
	}
	return out, nil
}

// readOrders reads the orders ids into found, and the units partial
// reverts gave back of their lines into returned (by order, then SKU).
func (s *Store) readOrders(ctx context.Context, q querier, ids []string, found map[string]*stock.OrderInfo, returned map[string]map[string]int64) error {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rs, err := q.QueryContext(ctx, s.q.sql("SELECT order_id, sku, qty, returned, user_id, state, deadline_ms FROM {L}"+
		" WHERE order_id IN ("+params(len(ids))+") ORDER BY order_id, line"), args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			id, sku, user    string
			qty, ret, st, dl int64
		)
		if err := rs.Scan(&id, &sku, &qty, &ret, &user, &st, &dl); err != nil {
			return err
		}
		if ret > 0 {
			if returned[id] == nil {
				returned[id] = map[string]int64{}
			}
			returned[id][sku] = ret
		}
		o := found[id]
		if o == nil {
			o = &stock.OrderInfo{ID: id, UserID: user, State: ledgerState(st)}
			found[id] = o
		}
		o.Items = append(o.Items, stock.Item{SKU: sku, Qty: qty})
		if d := time.UnixMilli(dl); d.After(o.Deadline) {
			o.Deadline = d
		}
	}
	return rs.Err()
}

// ledgerState maps the ledger's state column to a stock.State.
func ledgerState(st int64) stock.State {
	switch st {
	case stateHeld:
		return stock.StateHeld
	case stateConfirmed:
		return stock.StateConfirmed
	case stateReverted:
		return stock.StateReverted
	case stateRefunded:
		return stock.StateRefunded
	case stateExpired:
		return stock.StateExpired
	}
	return stock.StateUnknown
}
