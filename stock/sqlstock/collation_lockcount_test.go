package sqlstock_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// On MySQL and MariaDB a Pessimistic Deduct of several SKUs locks their
// stock rows with one statement where the SKU column sorts in UTF-8's
// byte order (the table CreateTables makes, utf8mb4_bin, a binary string,
// or an application's own of that collation), and with one statement a
// row only where it does not (latin1_bin, a binary collation of another
// charset): InnoDB locks a statement's rows in the index's order, and the
// rows must be taken in byte order.
func TestStockRowsLockedInOneStatementWhereTheColumnSortsInByteOrder(t *testing.T) {
	real := testdb.MariaDB(t, 4)
	ctx := context.Background()
	for _, tc := range []struct {
		name, column string // column "": the table CreateTables makes
		statements   int
	}{
		{"created", "", 1},
		{"utf8mb4_bin", "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", 1},
		{"varbinary", "VARBINARY(128)", 1},
		{"latin1_bin", "VARCHAR(128) CHARACTER SET latin1 COLLATE latin1_bin", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := testdb.Unique("lcs")
			t.Cleanup(func() { _, _ = real.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
			if tc.column != "" {
				if _, err := real.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku "+tc.column+" NOT NULL PRIMARY KEY,"+
					" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
					" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
					t.Fatal(err)
				}
			}
			p := &probe{drv: real.Driver(), dsn: testdb.WithParam(testdb.MySQL.Value(), "interpolateParams=true")}
			db := openProbe(t, p, "mysql", 4)
			s := newStoreOn(t, db.DB, sqlstock.Config{Table: table, Strategy: sqlstock.Pessimistic})
			skus := []string{"a", "B", "c"}
			var items []stock.Item
			for _, sku := range skus {
				if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
					t.Fatal(err)
				}
				items = append(items, stock.Item{SKU: sku, Qty: 1})
			}
			locks := func() (n int) {
				for _, st := range p.statements() {
					if strings.HasPrefix(st, "SELECT") && strings.Contains(st, "FROM `"+table+"`") && strings.Contains(st, " FOR UPDATE") {
						n++
					}
				}
				return n
			}
			before := locks()
			if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: items}); err != nil {
				t.Fatal(err)
			}
			if got := locks() - before; got != tc.statements {
				t.Errorf("the Deduct of %d SKUs locked their rows with %d statements, want %d", len(skus), got, tc.statements)
			}
			for _, sku := range skus {
				if lv, err := s.Levels(ctx, sku); err != nil || lv.Available != 9 || lv.Held != 1 {
					t.Errorf("Levels(%s) = %+v, %v; want 9 available, 1 held", sku, lv, err)
				}
			}
		})
	}
}
