package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// An application's own stock table whose SKU column has a case-insensitive
// collation (utf8mb4_general_ci, MariaDB's default) holds one row for "A"
// and "a": the database's statements treat them as one SKU, so the per-user
// limit must too. A user at the limit of "A" must not take more of the
// same row by spelling the SKU "a".
func TestZZCaseInsensitiveSKUKeepsPerUserLimit(t *testing.T) {
	real := testdb.MariaDB(t, 4)
	ctx := context.Background()
	table := testdb.Unique("zzci")
	t.Cleanup(func() { _, _ = real.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
	if _, err := real.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,"+
		" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
		" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	s := newStoreOn(t, real.DB, sqlstock.Config{Table: table, MaxGroup: 1})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	// The shop shows the product page of "a": the database answers with
	// the row of "A".
	lv, err := s.Levels(ctx, "a")
	if err != nil || lv.Available != 10 || lv.PerUserLimit != 1 {
		t.Fatalf("Levels(a) = %+v, %v; want the row of A (10 available, limit 1)", lv, err)
	}
	if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "A", Qty: 1}}}); err != nil {
		t.Fatalf("first order: %v", err)
	}
	err = s.Deduct(ctx, stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	lv, _ = s.Levels(ctx, "A")
	if !errors.Is(err, stock.ErrLimitReached) && !errors.Is(err, stock.ErrUnknownSKU) {
		t.Errorf("second order of the same row by user u1 (limit 1): %v, want ErrLimitReached (or a refusal); row now %d available, %d held", err, lv.Available, lv.Held)
	}
	if lv.Held != 1 {
		t.Errorf("row of A holds %d units for user u1, whose limit is 1", lv.Held)
	}
}

// The same within one order: "A" and "a" are two lines by Order.Validate,
// one row by the database.
func TestZZCaseInsensitiveSKUOneOrderKeepsPerUserLimit(t *testing.T) {
	real := testdb.MariaDB(t, 4)
	ctx := context.Background()
	table := testdb.Unique("zzci")
	t.Cleanup(func() { _, _ = real.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
	if _, err := real.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,"+
		" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
		" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	s := newStoreOn(t, real.DB, sqlstock.Config{Table: table, MaxGroup: 1})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Levels(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "A", Qty: 1}, {SKU: "a", Qty: 1}}})
	lv, _ := s.Levels(ctx, "A")
	if err == nil || lv.Held != 0 {
		t.Errorf("one order of 2 units of one row (limit 1): %v; row holds %d, want a refusal and 0 held", err, lv.Held)
	}
}

// The same on PostgreSQL, with an application's own stock table whose SKU
// column has a case-insensitive (nondeterministic ICU) collation.
func TestZZCaseInsensitiveSKUKeepsPerUserLimitPostgres(t *testing.T) {
	real := testdb.PostgreSQL(t, 4)
	ctx := context.Background()
	schema := testdb.Unique("zzci")
	table := testdb.Unique("zzci")
	if _, err := real.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = real.ExecContext(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`)
		_, _ = real.ExecContext(context.Background(), `DROP SCHEMA "`+schema+`" CASCADE`)
	})
	if _, err := real.ExecContext(ctx, `CREATE COLLATION "`+schema+`".ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`); err != nil {
		t.Fatal(err)
	}
	if _, err := real.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku VARCHAR(128) COLLATE "`+schema+`".ci NOT NULL PRIMARY KEY,`+
		` available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,`+
		` per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	s := newStoreOn(t, real.DB, sqlstock.Config{Table: table, MaxGroup: 1})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	lv, err := s.Levels(ctx, "a")
	if err != nil || lv.Available != 10 || lv.PerUserLimit != 1 {
		t.Fatalf("Levels(a) = %+v, %v; want the row of A (10 available, limit 1)", lv, err)
	}
	if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "A", Qty: 1}}}); err != nil {
		t.Fatalf("first order: %v", err)
	}
	err = s.Deduct(ctx, stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	lv, _ = s.Levels(ctx, "A")
	if !errors.Is(err, stock.ErrLimitReached) && !errors.Is(err, stock.ErrUnknownSKU) {
		t.Errorf("second order of the same row by user u1 (limit 1): %v, want ErrLimitReached (or a refusal); row now %d available, %d held", err, lv.Available, lv.Held)
	}
	if lv.Held != 1 {
		t.Errorf("row of A holds %d units for user u1, whose limit is 1", lv.Held)
	}
}

// On such a table the Store's calls disagree on whether SKU "a" exists
// when only "A" was put on sale: Levels reads A's row, Snapshot and the
// Optimistic and Pessimistic Deducts say there is no such SKU, the Atomic
// Deduct takes from A's row.
func TestZZCaseInsensitiveSKUCallsAgree(t *testing.T) {
	real := testdb.MariaDB(t, 8)
	ctx := context.Background()
	table := testdb.Unique("zzci")
	ledger := testdb.Unique("zzcl")
	t.Cleanup(func() { _, _ = real.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
	if _, err := real.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,"+
		" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
		" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	s := newStoreOn(t, real.DB, sqlstock.Config{Table: table, Ledger: ledger})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "A", Units: 10}); err != nil {
		t.Fatal(err)
	}
	answers := map[string]bool{} // call: says "a" exists
	_, err := s.Levels(ctx, "a")
	answers["Levels"] = err == nil
	snap, err := s.Snapshot(ctx, []string{"a"})
	answers["Snapshot"] = err == nil && len(snap) == 1 && snap[0].Exists
	for i, st := range strategies {
		other, err := sqlstock.New(real.DB, sqlstock.Config{Table: table, Ledger: ledger, Strategy: st})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = other.Levels(ctx, "a")
		err = other.Deduct(ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
		answers["Deduct/"+st.String()] = !errors.Is(err, stock.ErrUnknownSKU)
	}
	first := answers["Levels"]
	for _, exists := range answers {
		if exists != first {
			t.Errorf("SKU \"a\" on a table holding only \"A\": %v", answers)
			break
		}
	}
}
