package sqlstock

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// ReclaimExpired implements stock.Reclaimer. It reads up to limit due
// held lines with units left (partial reverts may have emptied some)
// through the ledger's (state, deadline) index, so a pass costs
// in proportion to what is due, not to the ledger's size. Then, in one
// transaction, their orders are moved from held to expired in batches:
// on PostgreSQL and SQLite one conditional UPDATE ... RETURNING per batch
// of orders, on MySQL and MariaDB a SELECT ... FOR UPDATE of their held
// lines then one conditional UPDATE. Only lines still held and due move,
// so several reclaimers may run at once and each order is returned by
// exactly one; the won units go back with one UPDATE per SKU, in sorted
// order. An order's lines are reclaimed together, so the result may hold
// more than limit lines when an order has lines beyond the limit. Each
// line returns, and reports as its Qty, what partial reverts left of it;
// a line they gave back whole is not reported. The result is sorted by
// order ID, then line.
//
// Like every call it answers within Store.AnswerBound: its read of the
// due lines waits for a pool connection and the server at most
// Config.LockWait, and then it is a *ContentionError, nothing applied.
// A COMMIT whose outcome is unknown is reported as stock.ErrUnknownOutcome
// at once, never run again (a second run would report nothing for the
// orders the first may have returned); the next pass returns whatever is
// still due.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) (out []stock.Reclaimed, err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpReclaim, 0)
	defer func() { tr.Done(err) }()
	var (
		start       time.Time
		oldest, now int64 // ms; oldest 0: none due
	)
	if s.obs.Reclaiming() {
		start = time.Now()
		defer func() {
			var at time.Time
			if oldest > 0 {
				at = time.UnixMilli(oldest)
			}
			s.obs.PassDone(ctx, "sqlstock", start, out, at, time.UnixMilli(now), err)
		}()
	}
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: "must be at least 1"}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now = s.nowMS()
	began := time.Now()
	var ids []string
	err = s.read(ctx, "reclaim", func(ctx context.Context) (err error) {
		if err := s.ready(ctx, s.db); err != nil {
			return err
		}
		ids, oldest, err = s.dueOrders(ctx, now, limit)
		return err
	})
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	err = s.retrySince(ctx, "reclaim", false, began, func(ctx context.Context) error {
		out = nil
		return s.inTx(ctx, func(q querier) error {
			var lines []expiredLine
			for rest := ids; len(rest) > 0; {
				chunk := rest[:min(len(rest), maxReclaimBatch)]
				rest = rest[len(chunk):]
				got, err := s.expireOrders(ctx, q, chunk, now)
				if err != nil {
					return err
				}
				lines = append(lines, got...)
			}
			slices.SortFunc(lines, func(a, b expiredLine) int {
				if c := strings.Compare(a.OrderID, b.OrderID); c != 0 {
					return c
				}
				return a.line - b.line
			})
			totals := map[string]int64{}
			for _, l := range lines {
				if l.Qty == 0 {
					continue // partial reverts gave the whole line back
				}
				out = append(out, l.Reclaimed)
				totals[l.SKU] += l.Qty
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

// maxReclaimBatch is how many orders one reclaim statement moves.
const maxReclaimBatch = 500

// expiredLine is a reclaimed line and its position in its order.
type expiredLine struct {
	stock.Reclaimed
	line int
}

// expireOrders moves the lines of ids that are still held and due at now
// to expired, and returns them, each with what it still held as its Qty.
func (s *Store) expireOrders(ctx context.Context, q querier, ids []string, now int64) ([]expiredLine, error) {
	args := make([]any, 0, len(ids)+1)
	args = append(args, now)
	for _, id := range ids {
		args = append(args, id)
	}
	where := " WHERE state = 1 AND deadline_ms <= ? AND order_id IN (" + params(len(ids)) + ")"
	cols := "order_id, line, sku, qty - returned, user_id"
	if s.d.mysqlLike() {
		// No UPDATE ... RETURNING: lock the lines (waiting at most
		// Config.LockWait, as every lock of the Store does), then move
		// exactly them.
		lines, err := s.scanExpired(q.QueryContext(ctx, s.q.sql("SELECT"+s.q.lockHint+" "+cols+" FROM {L}"+where+s.q.lockSuffix), args...))
		if err != nil || len(lines) == 0 {
			return nil, err
		}
		n, err := affected(q.ExecContext(ctx, s.q.write("UPDATE {L} SET state = 5"+where), args...))
		if err != nil {
			return nil, err
		}
		if n != int64(len(lines)) {
			return nil, errRetry // cannot happen under the lock: never return units twice
		}
		return lines, nil
	}
	return s.scanExpired(q.QueryContext(ctx, s.q.write("UPDATE {L} SET state = 5"+where+" RETURNING "+cols), args...))
}

func (s *Store) scanExpired(rs *sql.Rows, err error) ([]expiredLine, error) {
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var lines []expiredLine
	for rs.Next() {
		var l expiredLine
		if err := rs.Scan(&l.OrderID, &l.line, &l.SKU, &l.Qty, &l.UserID); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rs.Err()
}

// dueOrders returns the sorted IDs of the orders of up to limit held lines
// with units left whose deadline is at or before now, earliest deadline
// first.
func (s *Store) dueOrders(ctx context.Context, now int64, limit int) (ids []string, oldestMs int64, err error) {
	rs, err := s.db.QueryContext(ctx, s.q.due, now, limit)
	if err != nil {
		return nil, 0, err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			id string
			dl int64
		)
		if err := rs.Scan(&id, &dl); err != nil {
			return nil, 0, err
		}
		if len(ids) == 0 {
			oldestMs = dl // earliest deadline first
		}
		ids = append(ids, id)
	}
	if err := rs.Err(); err != nil {
		return nil, 0, err
	}
	slices.Sort(ids)
	return slices.Compact(ids), oldestMs, nil
}
