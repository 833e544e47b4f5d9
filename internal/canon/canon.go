// Package canon gives an order's items one canonical form, so backends agree
// on an order's identity however its lines were listed.
package canon

import (
	"slices"
	"strconv"
	"strings"

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
	for _, it := range sorted {
		b.WriteString(it.SKU)
		b.WriteByte(0x1f)
		b.WriteString(strconv.FormatInt(it.Qty, 10))
		b.WriteByte(0x1e)
	}
	return b.String()
}
