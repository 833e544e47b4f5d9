// Package canon gives an order's items one canonical form, so backends agree
// on an order's identity however its lines were listed.
package canon

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Sorted returns a copy of items sorted by SKU. Backends take and lock SKUs
// in this order, so two multi-SKU orders never wait on each other in a cycle.
func Sorted(items []stock.Item) []stock.Item {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b stock.Item) int { return strings.Compare(a.SKU, b.SKU) })
	return out
}

// Signature encodes sorted items as "sku\x1fqty\x1e..." — separators that
// stock.ValidateID refuses inside a SKU, so the encoding is unambiguous.
// Two orders with the same signature ask for the same items.
func Signature(sorted []stock.Item) string {
	var b strings.Builder
	b.Grow(SignatureLen(sorted))
	WriteSignature(&b, sorted)
	return b.String()
}

// WriteSignature writes the Signature of sorted to b.
func WriteSignature(b *strings.Builder, sorted []stock.Item) {
	var num [20]byte
	for _, it := range sorted {
		b.WriteString(it.SKU)
		b.WriteByte(0x1f)
		b.Write(strconv.AppendInt(num[:0], it.Qty, 10))
		b.WriteByte(0x1e)
	}
}

// SignatureLen is an upper bound of the length of the Signature of items.
func SignatureLen(items []stock.Item) int {
	n := 0
	for _, it := range items {
		n += len(it.SKU) + 2 + 19 // a quantity has at most 19 digits
	}
	return n
}

// Hold returns an order's hold time and the bound of its deadline, both
// counted from its Deduct: own (the order's HoldTTL) if it is set, else
// the shortest of its SKUs' hold times, and the shortest of their maximum
// hold times. holds and maxes are the SKUs' settings, line by line. bad is
// the index of the line whose maximum an own hold time passes, or -1.
func Hold(own time.Duration, holds, maxes []time.Duration) (hold, bound time.Duration, bad int) {
	own = own.Truncate(time.Millisecond) // backends keep hold times in whole milliseconds
	hold, bound, tightest := stock.MaxHoldTTL, stock.MaxHoldTTL, -1
	for i := range holds {
		hold = min(hold, holds[i])
		if maxes[i] < bound {
			bound, tightest = maxes[i], i
		}
	}
	switch {
	case own == 0:
		return hold, bound, -1
	case own > bound:
		return own, bound, tightest
	}
	return own, bound, -1
}

// Returned merges the units partial reverts gave back into a sorted,
// OrderInfo-shaped list: nil when none were.
func Returned(by map[string]int64) []stock.Item {
	if len(by) == 0 {
		return nil
	}
	out := make([]stock.Item, 0, len(by))
	for sku, n := range by {
		if n > 0 {
			out = append(out, stock.Item{SKU: sku, Qty: n})
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b stock.Item) int { return strings.Compare(a.SKU, b.SKU) })
	return out
}

// maxMillis bounds the milliseconds Millis gives: 2^53, about 285,000
// years either side of 1970, which a Lua number (a double) and every SQL
// BIGINT hold exactly.
const maxMillis = 1 << 53

// Millis is t in whole milliseconds since the Unix epoch, as backends keep
// deadlines, with times beyond about 285,000 years of 1970 taken as that
// bound (time.Time.UnixMilli wraps around for times past int64 milliseconds,
// which would turn a far deadline into one in the past).
func Millis(t time.Time) int64 {
	switch {
	case t.After(time.UnixMilli(maxMillis)):
		return maxMillis
	case t.Before(time.UnixMilli(-maxMillis)):
		return -maxMillis
	}
	return t.UnixMilli()
}
