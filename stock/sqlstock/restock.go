package sqlstock

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Op is one applied restock, as the operations table keeps it.
type Op struct {
	// ID is the restock's operation ID (stock.Restock.OpID).
	ID string
	// SKU and Units are what it added.
	SKU   string
	Units int64
	// CreatedMs is when it was applied, in Unix milliseconds of the
	// Store's Clock.
	CreatedMs int64
}

// errOpExists: the operations table's primary key refused the restock.
var errOpExists = errors.New("sqlstock: operation ID already applied")

// Restock implements stock.Manager. In one transaction it records the
// operation ID in the operations table (see Schema) and adds the units to
// the SKU's row, so a restock is applied exactly once per ID: a repeat
// with the same SKU and Units returns nil and adds nothing, another SKU or
// count under the same ID fails with stock.ErrConflict. A COMMIT whose
// outcome is unknown is run again, and the operations table tells whether
// it applied; if that cannot be learned the error matches
// stock.ErrUnknownOutcome. Operation IDs are kept for as long as the table
// keeps their rows.
func (s *Store) Restock(ctx context.Context, r stock.Restock) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpRestock, 1)
	defer func() { tr.Done(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	return s.retry(ctx, "restock", true, func(ctx context.Context) error {
		err := s.inTx(ctx, func(q querier) error {
			if _, err := q.ExecContext(ctx, s.q.insertOp, r.OpID, r.SKU, r.Units, s.nowMS()); err != nil {
				if classify(err) == errDuplicate {
					return errOpExists
				}
				return err
			}
			n, err := affected(q.ExecContext(ctx, s.q.restock, r.Units, r.SKU, stock.MaxUnits-r.Units))
			if err != nil || n == 1 {
				return err
			}
			err = q.QueryRowContext(ctx, s.q.levels, r.SKU).Scan(new(int64), new(int64), new(int64), new(int64), new(int64), new(int64))
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return &stock.SKUError{SKU: r.SKU, Err: stock.ErrUnknownSKU}
			case err != nil:
				return err
			}
			return &stock.InvalidError{Field: "restock.Units", Reason: "restock would pass stock.MaxUnits"}
		})
		if errors.Is(err, errOpExists) {
			return s.appliedOp(ctx, r)
		}
		return err
	})
}

// appliedOp answers a restock whose operation ID is already recorded: nil
// if it is the same restock, ErrConflict if not.
func (s *Store) appliedOp(ctx context.Context, r stock.Restock) error {
	var (
		sku   string
		units int64
	)
	err := s.db.QueryRowContext(ctx, s.q.readOp, r.OpID).Scan(&sku, &units)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return errRetry // the other transaction rolled back: apply it now
	case err != nil:
		return err
	case sku != r.SKU || units != r.Units:
		return &opError{ID: r.OpID, Err: stock.ErrConflict}
	}
	return nil
}

// opError names the restock operation a business outcome applies to.
type opError struct {
	ID  string
	Err error
}

func (e *opError) Error() string { return e.Err.Error() + ": restock operation " + quoteName(e.ID) }
func (e *opError) Unwrap() error { return e.Err }

// Restocks returns the restocks of the SKUs applied at or after sinceMs
// (Unix milliseconds of the Store's Clock), as of the View's instant,
// earliest first (ties by ID), each once however often its SKU is named,
// in one statement per 1000 distinct SKUs.
func (v *View) Restocks(ctx context.Context, skus []string, sinceMs int64) ([]Op, error) {
	if err := validSKUs(skus); err != nil {
		return nil, err
	}
	var out []Op
	for _, batch := range readBatches(skus) {
		rs, err := v.tx.QueryContext(ctx, v.s.q.sql("SELECT op_id, sku, units, created_ms FROM {O}"+
			" WHERE sku IN ("+params(len(batch))+") AND created_ms >= ?"), append(anys(batch), sinceMs)...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var op Op
			if err := rs.Scan(&op.ID, &op.SKU, &op.Units, &op.CreatedMs); err != nil {
				rs.Close()
				return nil, err
			}
			out = append(out, op)
		}
		err = rs.Err()
		rs.Close()
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.CreatedMs, b.CreatedMs), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}
