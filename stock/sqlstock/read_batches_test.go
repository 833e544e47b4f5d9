package sqlstock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Orders answers an ID given twice, in different batches of 1000 IDs,
// with the order's own lines at both places, never with its lines
// twice.
func TestOrdersWithARepeatedIDPastOneBatch(t *testing.T) {
	db := testdb.SQLite(t, 4)
	ctx := context.Background()
	s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.SQLite})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Deduct(ctx, stock.Order{ID: "x", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"x"}
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("none-%d", i))
	}
	ids = append(ids, "x")
	got, err := s.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("Orders answered %d orders for %d IDs", len(got), len(ids))
	}
	for _, i := range []int{0, len(ids) - 1} {
		if o := got[i]; o.ID != "x" || len(o.Items) != 1 || o.Items[0] != (stock.Item{SKU: "a", Qty: 2}) {
			t.Errorf("Orders(...)[%d] (order x) = %s %v; want x [{a 2}]", i, o.ID, o.Items)
		}
	}
	for i := 1; i < len(ids)-1; i++ {
		if got[i].ID != ids[i] || len(got[i].Items) != 0 {
			t.Fatalf("Orders(...)[%d] = %+v; want the unknown order %s", i, got[i], ids[i])
		}
	}
}

// View.HeldLines lists each held line once, however often its SKU is
// named, also in different batches of 1000 SKUs, so a caller summing them
// (units in flight) counts each hold once; View.Restocks lists each
// restock once the same way.
func TestHeldLinesWithARepeatedSKUPastOneBatch(t *testing.T) {
	db := testdb.SQLite(t, 4)
	ctx := context.Background()
	s := newStore(t, db, sqlstock.Config{Dialect: sqlstock.SQLite})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Deduct(ctx, stock.Order{ID: "x", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 3}); err != nil {
		t.Fatal(err)
	}
	skus := []string{"a"}
	for i := range 1000 {
		skus = append(skus, fmt.Sprintf("none-%d", i))
	}
	skus = append(skus, "a")
	v, err := s.View(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	lines, err := v.HeldLines(ctx, skus)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 {
		t.Errorf("HeldLines lists %d lines for the one held line of order x: %+v", len(lines), lines)
	}
	ops, err := v.Restocks(ctx, skus, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 {
		t.Errorf("Restocks lists %d restocks for the one restock r1: %+v", len(ops), ops)
	}
}
