package sqlstock

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// SKULevels is one SKU's row as a read saw it.
type SKULevels struct {
	SKU string
	// Exists is false for a SKU with no row; the other fields are zero.
	Exists bool
	stock.Levels
	// Version grows with every write of the row.
	Version int64
}

// Line is one held order line of the ledger.
type Line struct {
	OrderID string
	UserID  string
	SKU     string
	// Qty is what the line still holds: its units less those partial
	// reverts (Store.RevertItems) gave back.
	Qty      int64
	Deadline time.Time
}

// Snapshot reads the levels of every SKU, in input order, in one statement
// per 1000 distinct SKUs. Each row is read atomically; rows of different statements
// at different moments (use View for one consistent read).
func (s *Store) Snapshot(ctx context.Context, skus []string) ([]SKULevels, error) {
	return s.levelsOf(ctx, s.db, skus)
}

// SKUs lists up to limit SKUs of the stock table greater than after, in
// the database's order of the SKU column: call it again with the last one
// to page through every SKU.
func (s *Store) SKUs(ctx context.Context, after string, limit int) ([]string, error) {
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: strconv.Itoa(limit) + " is below 1"}
	}
	if err := s.ready(ctx, s.db); err != nil {
		return nil, err
	}
	rs, err := s.db.QueryContext(ctx, s.q.sql("SELECT {sku} FROM {T} WHERE {sku} > ? ORDER BY {sku} LIMIT ?"), after, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var sku string
		if err := rs.Scan(&sku); err != nil {
			return nil, err
		}
		out = append(out, sku)
	}
	return out, rs.Err()
}

// View is a consistent read of the stock table and the ledger: every read
// made through it sees the database as of one instant (a read-only
// REPEATABLE READ transaction on MySQL, MariaDB and PostgreSQL; a read
// transaction on SQLite, whose WAL mode keeps it from blocking writers).
// It is not safe for concurrent use; Close it when done.
type View struct {
	s  *Store
	tx *sql.Tx
}

// View opens a consistent read. The instant it reads is fixed by its first
// read, not by this call.
func (s *Store) View(ctx context.Context) (*View, error) {
	if err := s.ready(ctx, s.db); err != nil {
		return nil, err
	}
	var opts *sql.TxOptions
	if s.d != SQLite {
		opts = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &View{s: s, tx: tx}, nil
}

// Close ends the read.
func (v *View) Close() error { return v.tx.Rollback() }

// Levels is Store.Snapshot as of the View's instant.
func (v *View) Levels(ctx context.Context, skus []string) ([]SKULevels, error) {
	return v.s.levelsOf(ctx, v.tx, skus)
}

// Orders is Store.Orders as of the View's instant.
func (v *View) Orders(ctx context.Context, ids []string) ([]stock.OrderInfo, error) {
	return v.s.orders(ctx, v.tx, ids)
}

// HeldLines returns the held ledger lines of the SKUs (including those
// past their deadline that no reclaimer has returned yet), each once
// however often its SKU is named, in one statement per 1000 distinct
// SKUs. A line partial reverts gave back whole is
// left out: it holds nothing.
func (v *View) HeldLines(ctx context.Context, skus []string) ([]Line, error) {
	if err := validSKUs(skus); err != nil {
		return nil, err
	}
	var out []Line
	for _, batch := range readBatches(skus) {
		rs, err := v.tx.QueryContext(ctx, v.s.q.sql("SELECT order_id, sku, qty - returned, user_id, deadline_ms FROM {L}"+
			" WHERE state = 1 AND qty > returned AND sku IN ("+params(len(batch))+")"), anys(batch)...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				l  Line
				dl int64
			)
			if err := rs.Scan(&l.OrderID, &l.SKU, &l.Qty, &l.UserID, &dl); err != nil {
				rs.Close()
				return nil, err
			}
			l.Deadline = time.UnixMilli(dl)
			out = append(out, l)
		}
		if err := rs.Err(); err != nil {
			rs.Close()
			return nil, err
		}
		rs.Close()
	}
	return out, nil
}

func (s *Store) levelsOf(ctx context.Context, q querier, skus []string) ([]SKULevels, error) {
	if err := validSKUs(skus); err != nil {
		return nil, err
	}
	if err := s.ready(ctx, s.db); err != nil { // a View's reads find it known
		return nil, err
	}
	found := make(map[string]SKULevels, len(skus))
	for _, batch := range readBatches(skus) {
		rs, err := q.QueryContext(ctx, s.q.sql("SELECT {sku}, {avail}, {held}, {sold}, {limit}, {ttl}, {maxttl}, {ver} FROM {T}"+
			" WHERE {sku} IN ("+params(len(batch))+")"), anys(batch)...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				l   = SKULevels{Exists: true}
				set settings
			)
			if err := rs.Scan(&l.SKU, &l.Available, &l.Held, &l.Sold, &set.limit, &set.ttlMS, &set.maxMS, &l.Version); err != nil {
				rs.Close()
				return nil, err
			}
			set.levels(&l.Levels)
			found[l.SKU] = l
		}
		if err := rs.Err(); err != nil {
			rs.Close()
			return nil, err
		}
		rs.Close()
	}
	out := make([]SKULevels, len(skus))
	for i, sku := range skus {
		if l, ok := found[sku]; ok {
			out[i] = l
		} else {
			out[i] = SKULevels{SKU: sku}
		}
	}
	return out, nil
}

func validSKUs(skus []string) error {
	for i, sku := range skus {
		if err := stock.ValidateID("skus["+strconv.Itoa(i)+"]", sku); err != nil {
			return err
		}
	}
	return nil
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
