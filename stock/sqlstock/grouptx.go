package sqlstock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stockguard/stockguard/stock"
)

// errNoFit: a group's conditional UPDATE of its sum changed nothing (too
// few units, or settings other than the remembered ones). The group is
// decided again order by order against the locked rows.
var errNoFit = fmt.Errorf("%w: group does not fit", errRetry)

// maxLinesPerInsert bounds the rows of one ledger INSERT (lineParams
// parameters each), well within every dialect's parameter limit.
const maxLinesPerInsert = 1000

// deductGroup writes the orders of batch in one transaction, and sets
// every call's res (the caller, drain, then hands the calls their
// outcomes: grouper.answer). A later order with the ID of an earlier one
// in the batch is not written by the group: it runs alone once the group
// has ended, and gets the ledger's answer. A group of one order runs alone
// too.
func (s *Store) deductGroup(ctx context.Context, batch []*gcall) {
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

// batchSKUs are the SKUs a group names, sorted, and for each order the
// index in skus of each of its (sorted) items.
type batchSKUs struct {
	skus []string
	idx  [][]int
}

func skusOf(calls []*gcall) batchSKUs {
	pos := map[string]int{}
	var b batchSKUs
	for _, c := range calls {
		for _, it := range c.items {
			if _, ok := pos[it.SKU]; !ok {
				pos[it.SKU] = 0
				b.skus = append(b.skus, it.SKU)
			}
		}
	}
	slices.Sort(b.skus)
	for i, sku := range b.skus {
		pos[sku] = i
	}
	b.idx = make([][]int, len(calls))
	for ci, c := range calls {
		b.idx[ci] = make([]int, len(c.items))
		for i, it := range c.items {
			b.idx[ci][i] = pos[it.SKU]
		}
	}
	return b
}

// groupTx decides and writes calls in one transaction. The first try
// assumes the group fits: it writes every order's lines, then takes each
// SKU's sum with one conditional UPDATE, in SKU order, that also checks
// the remembered settings (no per-user limit, the hold times used for the
// deadlines and bounds). If an UPDATE changes nothing, or a SKU has a
// limit or unremembered settings, or an order's own hold time passes its
// SKUs' maximum, the group is decided against the rows locked
// FOR UPDATE instead: orders in arrival order, each all-or-nothing
// against what the orders before it took. A failure that proves nothing
// applied (a duplicate ID, a deadlock) splits the group: every order runs
// again alone. A failure after which the COMMIT may have applied leaves
// every written order to learn its outcome by its own ID.
func (s *Store) groupTx(ctx context.Context, calls []*gcall) {
	b := skusOf(calls)
	if set, ok := s.cachedSettings(b.skus); ok && !anyLimit(set) {
		now := s.nowMS()
		if hs, ok := holds(calls, b, set, now); ok && s.groupFits(ctx, calls, b, set, hs, now) {
			return
		}
	}
	var refused []error
	err := s.inTxRows(ctx, b.skus, func(q querier) error {
		var err error
		refused, err = s.admitLocked(ctx, q, calls, b)
		return err
	})
	s.groupDone(calls, refused, err)
}

// groupFits is groupTx's first try, with the remembered settings set and
// the orders' holds hs: it reports false, with nothing written, when an
// UPDATE changed nothing (the group does not fit, or the settings are not
// the rows'), and otherwise sets every call's res.
func (s *Store) groupFits(ctx context.Context, calls []*gcall, b batchSKUs, set []settings, hs []hold, now int64) bool {
	sums := groupSums(calls, b, nil)
	err := s.inTxRows(ctx, b.skus, func(q querier) error {
		if err := s.insertGroup(ctx, q, calls, nil, hs, now); err != nil {
			return err
		}
		for i, sku := range b.skus {
			n, err := affected(q.ExecContext(ctx, s.later(q, i, s.q.take), sums[i], sums[i], sku, sums[i], 0, set[i].ttlMS, set[i].maxMS))
			if err != nil {
				return err
			}
			if n == 0 {
				return errNoFit
			}
		}
		return nil
	})
	if errors.Is(err, errNoFit) {
		return false
	}
	s.groupDone(calls, nil, err)
	return true
}

// holds gives each order its hold (holdOf) with the settings set of the
// group's SKUs, and reports false if an order's own hold time is refused.
func holds(calls []*gcall, b batchSKUs, set []settings, now int64) ([]hold, bool) {
	out := make([]hold, len(calls))
	for ci, c := range calls {
		mine := make([]settings, len(b.idx[ci]))
		for i, k := range b.idx[ci] {
			mine[i] = set[k]
		}
		if out[ci] = holdOf(c.o, c.items, mine, now); out[ci].err != nil {
			return nil, false
		}
	}
	return out, true
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
		case unknown, classify(err) == errLockWait:
			// An unknown outcome is the group's to learn. A lock wait took
			// Config.LockWait already: each order runs again alone only
			// within what is left of its call's time (retryFrom).
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
func (s *Store) admitLocked(ctx context.Context, q querier, calls []*gcall, b batchSKUs) ([]error, error) {
	rows, err := s.lockRows(ctx, q, b.skus)
	if err != nil {
		return nil, err
	}
	set := make([]settings, len(rows))
	left := make([]int64, len(rows))
	used := make([]map[string]int64, len(rows)) // per limited SKU: units of each user
	for i, r := range rows {
		set[i], left[i] = r.settings(), r.avail
		if r.found && r.limit > 0 {
			if used[i], err = s.userTotals(ctx, q, b.skus[i], calls, b, i); err != nil {
				return nil, err
			}
		}
	}
	now := s.nowMS()
	refused := make([]error, len(calls))
	hs := make([]hold, len(calls))
	admitted := 0
	for ci, c := range calls {
		if refused[ci] = admit(c, b.idx[ci], rows, set, left, used, now, &hs[ci]); refused[ci] == nil {
			admitted++
		}
	}
	if admitted == 0 {
		return refused, nil
	}
	if err := s.insertGroup(ctx, q, calls, refused, hs, now); err != nil {
		return nil, err
	}
	sums := groupSums(calls, b, refused)
	for i, sku := range b.skus {
		if sums[i] == 0 {
			continue
		}
		n, err := affected(q.ExecContext(ctx, s.q.take, sums[i], sums[i], sku, sums[i], set[i].limit, set[i].ttlMS, set[i].maxMS))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errRetry // cannot happen under the lock: never take more than the row has
		}
	}
	return refused, nil
}

// admit decides one order, whose items are the SKUs idx, against what is
// left of each SKU and what each user holds or bought, and takes its
// units from both if it fits, setting its hold *h as a Deduct at now does.
// Its refusal is the one a lone Deduct would get: an unknown SKU, no user
// for a limited SKU, then the first line sold out, then the first line
// over its limit, then an own hold time past its SKUs' maximum.
func admit(c *gcall, idx []int, rows []lockedRow, set []settings, left []int64, used []map[string]int64, now int64, h *hold) error {
	mine := make([]settings, len(idx))
	for i, k := range idx {
		if !rows[k].found {
			return &stock.SKUError{SKU: c.items[i].SKU, Err: stock.ErrUnknownSKU}
		}
		mine[i] = set[k]
	}
	if err := needUser(c.o, c.items, mine); err != nil {
		return err
	}
	for i, it := range c.items {
		if left[idx[i]] < it.Qty {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrSoldOut}
		}
	}
	for i, it := range c.items {
		if k := idx[i]; set[k].limit > 0 && used[k][c.o.UserID]+it.Qty > set[k].limit {
			return &stock.SKUError{SKU: it.SKU, Err: stock.ErrLimitReached}
		}
	}
	if *h = holdOf(c.o, c.items, mine, now); h.err != nil {
		return h.err
	}
	for i, it := range c.items {
		k := idx[i]
		left[k] -= it.Qty
		if set[k].limit > 0 {
			used[k][c.o.UserID] += it.Qty
		}
	}
	return nil
}

// userTotals reads what each user of the calls that name sku (the k-th
// SKU of b) holds or bought of it.
func (s *Store) userTotals(ctx context.Context, q querier, sku string, calls []*gcall, b batchSKUs, k int) (map[string]int64, error) {
	used := map[string]int64{}
	args := []any{sku}
	for ci, c := range calls {
		if _, ok := used[c.o.UserID]; !ok && c.o.UserID != "" && slices.Contains(b.idx[ci], k) {
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

// insertGroup writes the held lines of every order not refused, each
// with its hold hs[i], in as few statements as maxLinesPerInsert allows; a
// duplicate order ID comes back as errOrderExists.
func (s *Store) insertGroup(ctx context.Context, q querier, calls []*gcall, refused []error, hs []hold, now int64) error {
	args := make([]any, 0, lineParams*min(len(calls)*len(calls[0].items), maxLinesPerInsert))
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := q.ExecContext(ctx, s.q.insertLedger(len(args)/lineParams), args...)
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
		if len(args)/lineParams+len(c.items) > maxLinesPerInsert {
			if err := flush(); err != nil {
				return err
			}
		}
		for i, it := range c.items {
			args = append(args, c.o.ID, i, it.SKU, it.Qty, c.o.UserID, hs[ci].deadline, hs[ci].bound, now)
		}
	}
	return flush()
}

// groupSums adds up, per SKU of b, the units of the orders not refused.
func groupSums(calls []*gcall, b batchSKUs, refused []error) []int64 {
	sums := make([]int64, len(b.skus))
	for ci, c := range calls {
		if refused != nil && refused[ci] != nil {
			continue
		}
		for i, it := range c.items {
			sums[b.idx[ci][i]] += it.Qty
		}
	}
	return sums
}

// cachedSettings returns the remembered settings of skus, if all are
// remembered.
func (s *Store) cachedSettings(skus []string) ([]settings, bool) {
	set := make([]settings, len(skus))
	for i, sku := range skus {
		v, ok := s.settings.Get(sku)
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
