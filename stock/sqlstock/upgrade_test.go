package sqlstock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// oldSchema is what Schema returned before partial reverts and hold
// extensions (commit ed17341), for the default column names: no
// max_hold_ttl_ms, no returned or bound_ms, no returns table.
func oldSchema(d sqlstock.Dialect, table, ledger string) []string {
	id, engine := "TEXT", ""
	switch d {
	case sqlstock.MySQL, sqlstock.MariaDB:
		id, engine = "VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", " ENGINE=InnoDB"
	case sqlstock.Postgres:
		id = `VARCHAR(128) COLLATE "C"`
	}
	q := func(name string) string { return quote(d, name) }
	stockTable := "CREATE TABLE IF NOT EXISTS " + q(table) + " (sku " + id + " NOT NULL PRIMARY KEY, " +
		"available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, " +
		"version BIGINT NOT NULL DEFAULT 0, per_user_limit BIGINT NOT NULL DEFAULT 0, " +
		"hold_ttl_ms BIGINT NOT NULL DEFAULT 900000)" + engine
	cols := "order_id " + id + " NOT NULL, line SMALLINT NOT NULL, sku " + id + " NOT NULL, qty BIGINT NOT NULL, " +
		"user_id " + id + " NOT NULL DEFAULT '', state SMALLINT NOT NULL, deadline_ms BIGINT NOT NULL, " +
		"created_ms BIGINT NOT NULL, PRIMARY KEY (order_id, line)"
	ops := "op_id " + id + " NOT NULL PRIMARY KEY, sku " + id + " NOT NULL, units BIGINT NOT NULL, created_ms BIGINT NOT NULL"
	if d == sqlstock.MySQL || d == sqlstock.MariaDB {
		return []string{stockTable,
			"CREATE TABLE IF NOT EXISTS " + q(ledger) + " (" + cols + ", KEY " + q(ledger+"_due") + " (state, deadline_ms), KEY " +
				q(ledger+"_sku_user") + " (sku, user_id))" + engine,
			"CREATE TABLE IF NOT EXISTS " + q(ledger+"_ops") + " (" + ops + ", KEY " + q(ledger+"_ops_sku") + " (sku, created_ms))" + engine}
	}
	return []string{stockTable,
		"CREATE TABLE IF NOT EXISTS " + q(ledger) + " (" + cols + ")",
		"CREATE INDEX IF NOT EXISTS " + q(ledger+"_due") + " ON " + q(ledger) + " (state, deadline_ms)",
		"CREATE INDEX IF NOT EXISTS " + q(ledger+"_sku_user") + " ON " + q(ledger) + " (sku, user_id)",
		"CREATE TABLE IF NOT EXISTS " + q(ledger+"_ops") + " (" + ops + ")",
		"CREATE INDEX IF NOT EXISTS " + q(ledger+"_ops_sku") + " ON " + q(ledger+"_ops") + " (sku, created_ms)"}
}

// oldTables creates tables as the earlier version did, with a SKU on sale
// and one held order of 2 units, written by that version's statements,
// and drops them (and the returns table an upgrade adds) when the test
// ends.
func oldTables(t *testing.T, db *sqlx.DB, d sqlstock.Dialect) sqlstock.Config {
	t.Helper()
	ctx := context.Background()
	cfg := sqlstock.Config{Dialect: d, Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")}
	t.Cleanup(func() {
		for _, table := range []string{cfg.Ledger + "_returns", cfg.Ledger + "_ops", cfg.Ledger, cfg.Table} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quote(d, table)); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	})
	for _, st := range oldSchema(d, cfg.Table, cfg.Ledger) {
		if _, err := db.ExecContext(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	epoch := stocktest.Epoch.UnixMilli()
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO " + quote(d, cfg.Table) + " (sku, available, held, sold, version, per_user_limit, hold_ttl_ms) VALUES (?, ?, ?, 0, 1, 5, ?)",
			[]any{"a", 8, 2, time.Minute.Milliseconds()}},
		{"INSERT INTO " + quote(d, cfg.Ledger) + " (order_id, line, sku, qty, user_id, state, deadline_ms, created_ms) VALUES (?, 0, ?, ?, ?, 1, ?, ?)",
			[]any{"old1", "a", 2, "u1", epoch + time.Minute.Milliseconds(), epoch}},
	} {
		if _, err := db.ExecContext(ctx, db.Rebind(st.sql), st.args...); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
	return cfg
}

// Tables created by the earlier version are upgraded in place, by
// CreateTables (safe to run again) or by Upgrade's statements, and keep
// their rows' meaning: the SKU's maximum hold time is its hold time, the
// old order cannot be extended, nothing was returned of it, and it can
// be partly returned, confirmed and refunded like any other. New orders
// get their own hold times and bounds.
func TestOldTablesAreUpgraded(t *testing.T) {
	for _, b := range backends() {
		for _, how := range []string{"CreateTables", "Upgrade"} {
			t.Run(b.name+"/"+how, func(t *testing.T) {
				b.need(t)
				db := b.open(t)
				ctx := t.Context()
				cfg := oldTables(t, db, b.dialect)
				clock := stocktest.NewClock(stocktest.Epoch)
				cfg.Clock = clock
				s, err := sqlstock.New(db.DB, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Deduct(ctx, mkOrder("before", "u1", mkItem("a", 1))); err == nil || stock.IsBusiness(err) {
					t.Fatalf("Deduct on tables not yet upgraded: %v, want the database's error", err)
				}
				switch how {
				case "CreateTables":
					mustOK(t, "CreateTables", s.CreateTables(ctx))
					mustOK(t, "CreateTables again", s.CreateTables(ctx))
				case "Upgrade":
					stmts, err := sqlstock.Upgrade(b.dialect, cfg)
					mustOK(t, "Upgrade", err)
					for _, st := range stmts {
						if _, err := db.ExecContext(ctx, st); err != nil {
							t.Fatalf("%s: %v", st, err)
						}
					}
					mustOK(t, "CreateTables after the upgrade", s.CreateTables(ctx))
				}

				lv, err := s.Levels(ctx, "a")
				if err != nil || lv.Available != 8 || lv.Held != 2 || lv.HoldTTL != time.Minute || lv.MaxHoldTTL != time.Minute || lv.PerUserLimit != 5 {
					t.Fatalf("Levels(a) = %+v, %v; want 8 available, 2 held, hold and max hold 1m", lv, err)
				}
				infos, err := s.Orders(ctx, []string{"old1"})
				if err != nil || infos[0].State != stock.StateHeld || infos[0].Returned != nil ||
					!slices.Equal(infos[0].Items, []stock.Item{mkItem("a", 2)}) || !infos[0].Deadline.Equal(stocktest.Epoch.Add(time.Minute)) {
					t.Fatalf("Orders(old1) = %+v, %v; want held, a 2, nothing returned, deadline 1m", infos, err)
				}
				if err := s.ExtendHold(ctx, "old1", stocktest.Epoch.Add(2*time.Minute)); !errors.Is(err, stock.ErrHoldTooLong) {
					t.Fatalf("ExtendHold of an old order: %v, want ErrHoldTooLong", err)
				}
				mustOK(t, "ExtendHold of an old order to its deadline", s.ExtendHold(ctx, "old1", stocktest.Epoch.Add(time.Minute)))
				mustOK(t, "Deduct of the old order repeated", s.Deduct(ctx, mkOrder("old1", "u1", mkItem("a", 2))))
				mustOK(t, "RevertItems of the old order", s.RevertItems(ctx, mkReturn("r1", "old1", mkItem("a", 1))))
				wantLevels(t, s, "after the partial revert", "a", 9, 1, 0)
				if n, err := s.UserUnits(ctx, "a", "u1"); err != nil || n != 1 {
					t.Fatalf("UserUnits = %d, %v; want 1", n, err)
				}
				mustOK(t, "Confirm the old order", s.Confirm(ctx, "old1"))
				wantLevels(t, s, "after Confirm", "a", 9, 0, 1)
				mustOK(t, "Revert the old order", s.Revert(ctx, "old1"))
				wantLevels(t, s, "after Revert", "a", 10, 0, 0)

				mustOK(t, "PutOnSale with a maximum", s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5,
					HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}))
				mustOK(t, "Deduct with an own hold time", s.Deduct(ctx, stock.Order{ID: "new1", UserID: "u1",
					Items: []stock.Item{mkItem("a", 2)}, HoldTTL: 2 * time.Minute}))
				wantDeadline(t, s, "new1", 2*time.Minute)
				mustOK(t, "ExtendHold of a new order", s.ExtendHold(ctx, "new1", stocktest.Epoch.Add(5*time.Minute)))
				wantDeadline(t, s, "new1", 5*time.Minute)
				if lv, err := s.Levels(ctx, "a"); err != nil || lv.MaxHoldTTL != 5*time.Minute {
					t.Fatalf("Levels(a) = %+v, %v; want max hold 5m", lv, err)
				}
			})
		}
	}
}
