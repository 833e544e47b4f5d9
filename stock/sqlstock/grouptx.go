package sqlstock

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockguard/stockguard/stock"
)

// errNoFit: a group's conditional UPDATE of its sum changed nothing (too
// few units, or settings other than the remembered ones). The group is
// decided again order by order against the locked rows.
var errNoFit = fmt.Errorf("%w: group does not fit", errRetry)

// maxLinesPerInsert bounds the rows of one ledger INSERT (7 parameters
// each), well within every dialect's parameter limit.
const maxLinesPerInsert = 1000

// deductGroup writes the orders of batch, which share one SKU set, in one
// transaction, and sets every call's res and closes its done. A later
// order with the ID of an earlier one in the batch is not written by the
// group: it runs alone once the group has ended, and gets the ledger's
// answer. A group of one order runs alone too.
func (s *Store) deductGroup(ctx context.Context, batch []*gcall) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	seen := make(map[string]bool, len(batch))
	calls := make([]*gcall, 0, len(batch))
	for _, c := range batch {
		if seen[c.o.ID] {
			c.res = errSplit
			continue
		}
		seen[c.o.ID] = true
		calls = append(calls, c)
	}
	if len(calls) == 1 {
		calls[0].res = errSplit
		return
	}
	if s.group != nil {
		s.group.groups.Add(1)
	}
	s.groupTx(ctx, calls)
}

// groupTx decides and writes calls in one transaction. The first try
// assumes the group fits: it writes every order's lines, then takes each
// SKU's sum with one conditional UPDATE that also checks the remembered
// settings (no per-user limit, the hold time used for the deadlines). If
// an UPDATE changes nothing, or a SKU has a limit or unremembered
// settings, the group is decided against the rows locked FOR UPDATE
// instead: orders in arrival order, each all-or-nothing against what the
// orders before it took. A failure that proves nothing applied (a
// duplicate ID, a deadlock) splits the group: every order runs again
// alone. A failure after which the COMMIT may have applied leaves every
// written order to learn its outcome by its own ID.
func (s *Store) groupTx(ctx context.Context, calls []*gcall) {
	items := calls[0].items
	if set, ok := s.cachedSettings(items); ok && !anyLimit(set) {
		now := s.nowMS()
		sums := groupSums(calls, nil)
		err := s.inTx(ctx, func(q querier) error {
			if err := s.insertGroup(ctx, q, calls, nil, now+minTTL(set), now); err != nil {
				return err
			}
			for i, it := range items {
				n, err := affected(q.ExecContext(ctx, s.q.take, sums[i], sums[i], it.SKU, sums[i], 0, set[i].ttlMS))
				if err != nil {
					return err
				}
				if n == 0 {
					return errNoFit
				}
			}
			return nil
		})
		if !errors.Is(err, errNoFit) {
			s.groupDone(calls, nil, err)
			return
		}
	}
	var refused []error
	err := s.inTx(ctx, func(q querier) error {
		var err error
		refused, err = s.admitLocked(ctx, q, calls)
		return err
	})
	s.groupDone(calls, refused, err)
}

// groupDone sets each call's res from the transaction's err and the
// orders it refused (refused[i] != nil; nil refused when none was).
func (s *Store) groupDone(calls []*gcall, refused []error, err error) {
	var ma *maybeApplied
	unknown := errors.As(err, &ma)
	for i, c := range calls {
		switch {
		case refused != nil && refused[i] != nil && (err == nil || unknown):
			c.res = refused[i] // not written: the refusal stands
		case err == nil:
			c.res = nil
		case unknown:
			c.res = err
		default:
			c.res = errSplit
		}
	}
}

// admitLocked locks the group's stock rows, decides each order in
// arrival order, then writes the admitted ones: their ledger lines and
// one UPDATE per SKU for their sum. It returns the refusals, indexed as
// calls.
func (s *Store) admitLocked(ctx context.Context, q querier, calls []*gcall) ([]error, error) {
	items := calls[0].items
	refused := make([]error, len(calls))
	rows, err := s.lockRows(ctx, q, items)
	if err != nil {
		if stock.IsBusiness(err) { // a SKU is gone: every order names it
			for i := range refused {
				refused[i] = err
			}
			return refused, nil
		}
		return nil, err
	}
	set := settingsOfRows(rows)
	used := make([]map[string]int64, len(items)) // per limited SKU: units of each user
	for i, it := range items {
		if set[i].limit == 0 {
			continue
		}
		if used[i], err = s.userTotals(ctx, q, it.SKU, calls); err != nil {
			return nil, err
		}
	}
	left := make([]int64, len(items))
	for i := range rows {
		left[i] = rows[i].avail
	}
	admitted := 0
	for ci, c := range calls {
		if refused[ci] = admit(c, set, left, used); refused[ci] == nil {
			admitted++
		}
	}
	if admitted == 0 {
		return refused, nil
	}
	now := s.nowMS()
	if err := s.insertGroup(ctx, q, calls, refused, now+minTTL(set), now); err != nil {
		return nil, err
	}
	sums := groupSums(calls, refused)
	for i, it := range items {
		if sums[i] == 0 {
			continue
		}
		n, err := affected(q.ExecContext(ctx, s.q.take, sums[i], sums[i], it.SKU, sums[i], set[i].limit, set[i].ttlMS))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errRetry // cannot happen under the lock: never take more than the row has
		}
	}
	return refused, nil
}

// admit decides one order against what is left of each SKU and what each
// user holds or bought, and takes its units from both if it fits. Its
// refusal is the one a lone Deduct would get: no user for a limited SKU,
// then the first line sold out, then the first line over its limit.
func admit(c *gcall, set []settings, left []int64, used []map[string]int64) error {
	if err := needUser(c.o, c.items, set); err != nil {
		return err
	}
	for i, it := range c.items {
		if left[i] < it.Qty {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrSoldOut}
		}
	}
	for i, it := range c.items {
		if set[i].limit > 0 && used[i][c.o.UserID]+it.Qty > set[i].limit {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrLimitReached}
		}
	}
	for i, it := range c.items {
		left[i] -= it.Qty
		if set[i].limit > 0 {
			used[i][c.o.UserID] += it.Qty
		}
	}
	return nil
}

// lockRows locks the stock rows of the sorted items, in SKU order, and
// reads them (and remembers their settings); a missing row is
// stock.ErrUnknownSKU.
func (s *Store) lockRows(ctx context.Context, q querier, items []stock.Item) ([]stockRow, error) {
	args := make([]any, len(items))
	for i, it := range items {
		args[i] = it.SKU
	}
	rs, err := q.QueryContext(ctx, s.q.lockStockIn(len(items)), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	found := make(map[string]stockRow, len(items))
	for rs.Next() {
		var (
			sku string
			r   stockRow
		)
		if err := rs.Scan(&sku, &r.avail, &r.limit, &r.ttlMS); err != nil {
			return nil, err
		}
		found[sku] = r
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	rows := make([]stockRow, len(items))
	for i, it := range items {
		r, ok := found[it.SKU]
		if !ok {
			s.settings.Remove(it.SKU)
			return nil, &stock.SKUError{SKU: it.SKU, Err: stock.ErrUnknownSKU}
		}
		s.settings.Add(it.SKU, settings{limit: r.limit, ttlMS: r.ttlMS})
		rows[i] = r
	}
	return rows, nil
}

// userTotals reads what each user of calls holds or bought of sku.
func (s *Store) userTotals(ctx context.Context, q querier, sku string, calls []*gcall) (map[string]int64, error) {
	used := map[string]int64{}
	args := []any{sku}
	for _, c := range calls {
		if _, ok := used[c.o.UserID]; !ok && c.o.UserID != "" {
			used[c.o.UserID] = 0
			args = append(args, c.o.UserID)
		}
	}
	if len(args) == 1 {
		return used, nil
	}
	rs, err := q.QueryContext(ctx, s.q.userTotals(len(args)-1), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			user  string
			total int64
		)
		if err := rs.Scan(&user, &total); err != nil {
			return nil, err
		}
		used[user] = total
	}
	return used, rs.Err()
}

// insertGroup writes the held lines of every order not refused, in as
// few statements as maxLinesPerInsert allows; a duplicate order ID comes
// back as errOrderExists.
func (s *Store) insertGroup(ctx context.Context, q querier, calls []*gcall, refused []error, deadline, now int64) error {
	per := len(calls[0].items)
	args := make([]any, 0, 7*min(len(calls)*per, maxLinesPerInsert))
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := q.ExecContext(ctx, s.q.insertLedger(len(args)/7), args...)
		args = args[:0]
		if err != nil && classify(err) == errDuplicate {
			return errOrderExists
		}
		return err
	}
	for ci, c := range calls {
		if refused != nil && refused[ci] != nil {
			continue
		}
		if len(args)/7+per > maxLinesPerInsert {
			if err := flush(); err != nil {
				return err
			}
		}
		for i, it := range c.items {
			args = append(args, c.o.ID, i, it.SKU, it.Qty, c.o.UserID, deadline, now)
		}
	}
	return flush()
}

// groupSums adds up, per SKU, the units of the orders not refused.
func groupSums(calls []*gcall, refused []error) []int64 {
	sums := make([]int64, len(calls[0].items))
	for ci, c := range calls {
		if refused != nil && refused[ci] != nil {
			continue
		}
		for i, it := range c.items {
			sums[i] += it.Qty
		}
	}
	return sums
}

// cachedSettings returns the remembered settings of the sorted items, if
// all are remembered.
func (s *Store) cachedSettings(items []stock.Item) ([]settings, bool) {
	set := make([]settings, len(items))
	for i, it := range items {
		v, ok := s.settings.Get(it.SKU)
		if !ok {
			return nil, false
		}
		set[i] = v
	}
	return set, true
}

func anyLimit(set []settings) bool {
	for _, v := range set {
		if v.limit > 0 {
			return true
		}
	}
	return false
}
