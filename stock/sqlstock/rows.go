package sqlstock

import (
	"context"

	"github.com/stockguard/stockguard/stock"
)

// stockRow is what a Deduct reads of one SKU's row.
type stockRow struct {
	avail, version, limit, ttlMS, maxMS int64
}

// readRows reads the rows of the sorted items through q, or fails with
// stock.ErrUnknownSKU naming the first SKU that has none.
func (s *Store) readRows(ctx context.Context, q querier, items []stock.Item) ([]stockRow, error) {
	skus := skuList(items)
	found, err := s.stockRows(ctx, q, s.q.readStock(len(skus)), skus)
	return itemRows(skus, found, err)
}

// checkRows refuses the order if a limited SKU has no user or a line has
// too few units.
func checkRows(o stock.Order, items []stock.Item, rows []stockRow) error {
	if err := needUser(o, items, settingsOfRows(rows)); err != nil {
		return err
	}
	for i, it := range items {
		if rows[i].avail < it.Qty {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrSoldOut}
		}
	}
	return nil
}

// settings returns the row's settings.
func (r stockRow) settings() settings {
	return settings{limit: r.limit, ttlMS: r.ttlMS, maxMS: r.maxMS}
}

func settingsOfRows(rows []stockRow) []settings {
	set := make([]settings, len(rows))
	for i, r := range rows {
		set[i] = r.settings()
	}
	return set
}

// settingsOf returns the remembered settings of the sorted items, or,
// when one is not remembered, reads them all (fresh).
func (s *Store) settingsOf(ctx context.Context, items []stock.Item) (set []settings, fresh bool, err error) {
	if set := s.remembered(items); set != nil {
		return set, false, nil
	}
	set, err = s.readSettings(ctx, items)
	return set, true, err
}

// remembered returns the remembered settings of the sorted items, or nil
// if one is not remembered.
func (s *Store) remembered(items []stock.Item) []settings {
	set := make([]settings, len(items))
	for i, it := range items {
		v, ok := s.settings.Get(it.SKU)
		if !ok {
			return nil
		}
		set[i] = v
	}
	return set
}

// readSettings reads the settings of the sorted items from their rows
// (and remembers them).
func (s *Store) readSettings(ctx context.Context, items []stock.Item) ([]settings, error) {
	rows, err := s.readRows(ctx, s.db, items)
	if err != nil {
		return nil, err
	}
	return settingsOfRows(rows), nil
}

// lockedRow is a stock row as a group reads it under its lock.
type lockedRow struct {
	stockRow
	found bool
}

// lockRows locks the stock rows of the sorted skus, in SKU order (Go's
// byte order, as every other statement of the Store takes them, whatever
// the SKU column's collation), and reads them (and remembers their
// settings); a SKU without a row comes back not found.
//
// PostgreSQL locks the rows of one SELECT ... ORDER BY ... FOR UPDATE in
// the order it sorts them, and the statement sorts in byte order (COLLATE
// "C"). InnoDB (MySQL, MariaDB) locks them as it finds them, in the
// index's order, which is the collation's whatever the ORDER BY: there,
// unless the SKU column's collation sorts in byte order (utf8mb4_bin, as
// in the tables CreateTables makes; read once, by detect), several rows
// are locked with one statement each, in order.
func (s *Store) lockRows(ctx context.Context, q querier, skus []string) ([]lockedRow, error) {
	if !s.known.Load().rowByRow || len(skus) < 2 {
		return s.stockRows(ctx, q, s.lockStockIn(q, len(skus)), skus)
	}
	found := make(map[string]stockRow, len(skus))
	for _, sku := range skus {
		if err := s.scanRows(ctx, q, s.q.lockStockOne, []string{sku}, found); err != nil {
			return nil, err
		}
	}
	return s.foundRows(skus, found), nil
}

// stockRows reads the stock rows of skus with query (readStock or
// lockStockIn) and remembers their settings; a SKU without a row comes
// back not found.
func (s *Store) stockRows(ctx context.Context, q querier, query string, skus []string) ([]lockedRow, error) {
	found := make(map[string]stockRow, len(skus))
	if err := s.scanRows(ctx, q, query, skus, found); err != nil {
		return nil, err
	}
	return s.foundRows(skus, found), nil
}

// scanRows reads the stock rows of skus with query into found, by SKU.
func (s *Store) scanRows(ctx context.Context, q querier, query string, skus []string, found map[string]stockRow) error {
	rs, err := q.QueryContext(ctx, query, anys(skus)...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			sku string
			r   stockRow
		)
		if err := rs.Scan(&sku, &r.avail, &r.version, &r.limit, &r.ttlMS, &r.maxMS); err != nil {
			return err
		}
		found[sku] = r
	}
	return rs.Err()
}

// foundRows returns the rows of skus in found, in their order, and
// remembers their settings; a SKU without a row comes back not found.
func (s *Store) foundRows(skus []string, found map[string]stockRow) []lockedRow {
	rows := make([]lockedRow, len(skus))
	for i, sku := range skus {
		r, ok := found[sku]
		if !ok {
			s.settings.Remove(sku)
			continue
		}
		s.settings.Add(sku, r.settings())
		rows[i] = lockedRow{r, true}
	}
	return rows
}

// lockItems locks the stock rows of the sorted items in SKU order (see
// lockRows) and reads them, or fails with stock.ErrUnknownSKU naming the
// first SKU without a row.
func (s *Store) lockItems(ctx context.Context, q querier, items []stock.Item) ([]stockRow, error) {
	skus := skuList(items)
	found, err := s.lockRows(ctx, q, skus)
	return itemRows(skus, found, err)
}

// itemRows returns the rows found (see stockRows) of the sorted skus
// read with err, or fails with err, or with stock.ErrUnknownSKU naming
// the first SKU without a row.
func itemRows(skus []string, found []lockedRow, err error) ([]stockRow, error) {
	if err != nil {
		return nil, err
	}
	rows := make([]stockRow, len(found))
	for i, r := range found {
		if !r.found {
			return nil, &stock.SKUError{SKU: skus[i], Err: stock.ErrUnknownSKU}
		}
		rows[i] = r.stockRow
	}
	return rows, nil
}

// skuList returns the SKUs of items, in their order.
func skuList(items []stock.Item) []string {
	skus := make([]string, len(items))
	for i, it := range items {
		skus[i] = it.SKU
	}
	return skus
}

// ledgerLine is one ledger row of an order.
type ledgerLine struct {
	line            int64 // position in SKU order
	sku, user       string
	qty, returned   int64 // ordered, and given back by partial reverts
	state, deadline int64
	bound           int64 // the latest deadline ExtendHold may set; 0 (a row of an older version): the deadline
}

// left is what the line still takes.
func (l ledgerLine) left() int64 { return l.qty - l.returned }

// readOrder returns the order's ledger lines in line order, through q,
// with the given statement (readOrder, or lockOrder inside a transaction).
func (s *Store) readOrder(ctx context.Context, q querier, query, orderID string) ([]ledgerLine, error) {
	rs, err := q.QueryContext(ctx, query, orderID)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var lines []ledgerLine
	for rs.Next() {
		var l ledgerLine
		if err := rs.Scan(&l.line, &l.sku, &l.qty, &l.returned, &l.user, &l.state, &l.deadline, &l.bound); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rs.Err()
}

// existing answers a Deduct of an order ID already in the ledger, read
// through q with readOrder (or lockOrder): ErrConflict for other items or
// another user (or none where there was one, and the other way round);
// nil if it holds or bought the same items before its deadline;
// ErrHoldExpired once its deadline passed (reclaimed or not yet);
// ErrOrderClosed once it was reverted. found is false if the ledger has
// no such order.
func (s *Store) existing(ctx context.Context, q querier, readOrder string, o stock.Order, items []stock.Item) (answer error, found bool, err error) {
	lines, err := s.readOrder(ctx, q, readOrder, o.ID)
	if err != nil || len(lines) == 0 {
		return nil, false, err
	}
	same := len(lines) == len(items) && lines[0].user == o.UserID
	for i := 0; same && i < len(items); i++ {
		same = lines[i].sku == items[i].SKU && lines[i].qty == items[i].Qty
	}
	switch st := lines[0].state; {
	case !same:
		return &orderError{ID: o.ID, Err: stock.ErrConflict}, true, nil
	case st == stateHeld && lines[0].deadline <= s.nowMS(), st == stateExpired:
		return &orderError{ID: o.ID, Err: stock.ErrHoldExpired}, true, nil
	case st == stateHeld, st == stateConfirmed:
		return nil, true, nil
	}
	return &orderError{ID: o.ID, Err: stock.ErrOrderClosed}, true, nil
}

// orderError names the order a business outcome applies to.
type orderError struct {
	ID  string
	Err error
}

func (e *orderError) Error() string { return e.Err.Error() + ": order " + quoteName(e.ID) }
func (e *orderError) Unwrap() error { return e.Err }
