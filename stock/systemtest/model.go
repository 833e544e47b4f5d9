package systemtest

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// order is the checker's own bookkeeping of one order: what it asked and
// what it was told. The tiers' states are read from them at each check.
type order struct {
	id, user string
	items    []stock.Item  // sorted by SKU
	hold     time.Duration // the shortest hold time of its SKUs
	// firstSent is when the first Deduct was sent; lastEnd when the latest
	// Deduct attempt ended (returned, or its node died). The gate's
	// deadline lies between firstSent+hold and lastEnd+hold.
	firstSent, lastEnd time.Time
	attempts           int
	parked             int // calls about the order that are parked
	// late is the step at which a Deduct of the order that parked ended
	// (0: none): a take it sent may have landed after a reclaim pass
	// returned the order's other lines.
	late int
	// doubt holds the kinds of call (deduct, confirm, revert) whose latest
	// attempt ended without a definitive answer: a later definitive answer
	// to the same kind settles it (a Revert settles a Confirm too), an
	// answer to another kind does not.
	doubt      map[string]bool
	yes        bool // a Deduct returned nil
	paid       bool // a Confirm returned nil
	revertSent bool // a Revert was sent
	reverted   bool // a Revert returned nil
	scripted   bool // bought by a Config.Script step
	// own is the order's own hold time (stock.Order.HoldTTL), 0 for none;
	// maxHold the shortest MaxHoldTTL of its SKUs (the bound of its
	// deadline, counted from its Deduct).
	own, maxHold time.Duration
	// returned are the units partial reverts told nil gave back, per SKU;
	// maybe those of the partial reverts sent and not refused on a first,
	// clean answer (an upper bound of what a tier may have given back).
	returned, maybe map[string]int64
	// ret is the partial revert in doubt (retried with its OpID), if any.
	ret *stock.Return
	// retAgain: ret had an answer that was not definitive, so a later
	// refusal may come after a tier applied it.
	retAgain bool
	// extTold is the latest deadline an ExtendHold told nil asked for;
	// extSent the latest any ExtendHold not refused asked for; ext the one
	// in doubt (retried as it is).
	extTold, extSent, ext time.Time
}

// left returns what the order still takes of sku as far as the checker
// knows: its line less the units returned or being returned.
func (o *order) left(sku string) int64 { return o.qty(sku) - o.maybe[sku] }

// leftAt returns what a tier's report of the order says it still takes of
// sku: the line less the units partial reverts gave back there.
func leftAt(in stock.OrderInfo, sku string, ordered int64) int64 {
	for _, it := range in.Returned {
		if it.SKU == sku {
			return ordered - it.Qty
		}
	}
	return ordered
}

// returnedAt returns the units a tier's report says partial reverts gave
// back of sku.
func returnedAt(in stock.OrderInfo, sku string) int64 {
	for _, it := range in.Returned {
		if it.SKU == sku {
			return it.Qty
		}
	}
	return 0
}

// doubtful reports whether some call about the order awaits a definitive
// answer.
func (o *order) doubtful() bool { return len(o.doubt) > 0 }

// settle books the end of a call of kind about the order.
func (o *order) settle(kind string, definitive bool) {
	if o.doubt == nil {
		o.doubt = map[string]bool{}
	}
	switch {
	case !definitive:
		o.doubt[kind] = true
	case kind == "revert":
		delete(o.doubt, "revert")
		delete(o.doubt, "confirm")
	default:
		delete(o.doubt, kind)
	}
}

// deadlineMin is the earliest the gate's deadline can be: its first
// Deduct plus its hold time, or the latest extension told nil. Every
// deadline is kept to the millisecond, the Deduct's time truncated
// (stock.HoldExtender), so a hold may end up to a millisecond before the
// instant firstSent+hold.
func (o *order) deadlineMin() time.Time {
	return later(o.firstSent.Truncate(time.Millisecond).Add(o.hold.Truncate(time.Millisecond)), o.extTold)
}

// deadlineMax is the latest the gate's deadline can be; false while a
// call about the order is parked (it may still write).
func (o *order) deadlineMax() (time.Time, bool) {
	if o.parked > 0 {
		return time.Time{}, false
	}
	return later(o.lastEnd.Add(o.hold), o.extSent), true
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (o *order) stockOrder() stock.Order {
	return stock.Order{ID: o.id, UserID: o.user, Items: slices.Clone(o.items), HoldTTL: o.own}
}

func (o *order) qty(sku string) int64 {
	for _, it := range o.items {
		if it.SKU == sku {
			return it.Qty
		}
	}
	return 0
}

func (o *order) String() string {
	var b strings.Builder
	b.WriteString(o.id + " " + o.user)
	for _, it := range o.items {
		b.WriteString(" " + it.SKU + "×" + strconv.FormatInt(it.Qty, 10))
	}
	if o.own != 0 {
		b.WriteString(" hold " + o.own.String())
	}
	return b.String()
}

// restockOp is one administrative restock and what the checker was told.
type restockOp struct {
	r       stock.Restock
	ok      bool // a call returned nil
	refused bool // a call returned a business error
	sent    bool
	parked  int
}

// sameItems reports whether the tier's lines are the order's.
func sameItems(a, b []stock.Item) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	cmp := func(p, q stock.Item) int { return strings.Compare(p.SKU, q.SKU) }
	slices.SortFunc(x, cmp)
	slices.SortFunc(y, cmp)
	return slices.Equal(x, y)
}
