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
// on SQLite one conditional UPDATE ... RETURNING per batch of orders; on
// MySQL, MariaDB and PostgreSQL a read of their due lines, a SELECT ...
// FOR UPDATE SKIP LOCKED of their stock rows and then of the lines, and
// one conditional UPDATE of the orders whose every due line and stock row
// the pass locked. An order whose lines or stock rows another transaction
// holds (a caller's open transaction, Store.InTx) is left to a later
// pass, without waiting: it never stops the return of the others. Only
// lines still held and due move, so several reclaimers may run at once
// and each order is returned by exactly one; the won units go back with
// one UPDATE per SKU, in sorted order. An order's lines are reclaimed together, so the result may hold
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
// On SQLite, whose one writer's transaction excludes every other, in one
// UPDATE ... RETURNING; elsewhere without waiting for any lock
// (expireUnlocked).
func (s *Store) expireOrders(ctx context.Context, q querier, ids []string, now int64) ([]expiredLine, error) {
	if s.d != SQLite {
		return s.expireUnlocked(ctx, q, ids, now)
	}
	args, where := dueArgs(ids, now)
	return s.scanExpired(q.QueryContext(ctx, s.q.write("UPDATE {L} SET state = 5"+where+" RETURNING "+expiredCols), args...))
}

// expiredCols are the columns of a reclaimed line, as scanExpired reads
// them.
const expiredCols = "order_id, line, sku, qty - returned, user_id"

// dueArgs returns the condition on the held lines of ids due at now, and
// its arguments.
func dueArgs(ids []string, now int64) (args []any, where string) {
	args = make([]any, 0, len(ids)+1)
	args = append(args, now)
	for _, id := range ids {
		args = append(args, id)
	}
	return args, " WHERE state = 1 AND deadline_ms <= ? AND order_id IN (" + params(len(ids)) + ")"
}

// expireUnlocked is expireOrders on MySQL, MariaDB and PostgreSQL, where
// other transactions hold rows: a caller's transaction (Store.InTx) may
// hold an order's lines or a stock row as long as it likes, and one such
// order must not stop the return of every other. It reads the orders' due
// lines without locking them, locks the stock rows of their SKUs with FOR
// UPDATE SKIP LOCKED, then, of the orders whose every stock row (of a line
// with units left) it locked, locks the due lines with FOR UPDATE SKIP
// LOCKED, and moves exactly the lines of the orders whose every due line
// it locked. The rest is left to the next pass. No statement waits for a
// lock, so the pass never waits for another transaction and never closes
// a lock cycle with one; a concurrent pass over the same SKUs finds their
// rows taken and leaves their orders to this one.
func (s *Store) expireUnlocked(ctx context.Context, q querier, ids []string, now int64) ([]expiredLine, error) {
	args, where := dueArgs(ids, now)
	seen, err := s.scanExpired(q.QueryContext(ctx, s.q.sql("SELECT "+expiredCols+" FROM {L}"+where), args...))
	if err != nil || len(seen) == 0 {
		return nil, err
	}
	due := map[string]int{}
	var skus []any
	needed := map[string]bool{}
	for _, l := range seen {
		due[l.OrderID]++
		if l.Qty > 0 && !needed[l.SKU] {
			needed[l.SKU] = true
			skus = append(skus, l.SKU)
		}
	}
	rows := map[string]bool{}
	if len(skus) > 0 {
		rs, err := q.QueryContext(ctx, s.q.sql("SELECT {sku} FROM {T} WHERE {sku} IN ("+params(len(skus))+") FOR UPDATE SKIP LOCKED"), skus...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var sku string
			if err := rs.Scan(&sku); err != nil {
				rs.Close()
				return nil, err
			}
			rows[sku] = true
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	skipped := map[string]bool{}
	for _, l := range seen {
		if l.Qty > 0 && !rows[l.SKU] {
			skipped[l.OrderID] = true
		}
	}
	candidates := orderIDs(seen, skipped)
	if len(candidates) == 0 {
		return nil, nil
	}
	args, where = dueArgs(candidates, now)
	lines, err := s.scanExpired(q.QueryContext(ctx, s.q.sql("SELECT "+expiredCols+" FROM {L}"+where+" FOR UPDATE SKIP LOCKED"), args...))
	if err != nil {
		return nil, err
	}
	locked := map[string]int{}
	for _, l := range lines {
		locked[l.OrderID]++
	}
	for _, l := range lines {
		if locked[l.OrderID] != due[l.OrderID] || (l.Qty > 0 && !rows[l.SKU]) {
			skipped[l.OrderID] = true
		}
	}
	keep := orderIDs(lines, skipped)
	if len(keep) == 0 {
		return nil, nil
	}
	kept := slices.DeleteFunc(lines, func(l expiredLine) bool { return skipped[l.OrderID] })
	args, where = dueArgs(keep, now)
	n, err := affected(q.ExecContext(ctx, s.q.write("UPDATE {L} SET state = 5"+where), args...))
	if err != nil {
		return nil, err
	}
	if n != int64(len(kept)) {
		return nil, errRetry // cannot happen under the locks: never return units twice
	}
	return kept, nil
}

// orderIDs returns the sorted, distinct order IDs of lines, but those of
// skipped.
func orderIDs(lines []expiredLine, skipped map[string]bool) []string {
	var ids []string
	for _, l := range lines {
		if !skipped[l.OrderID] {
			ids = append(ids, l.OrderID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
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
