package sqlstock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// The package doc: every strategy locks stock rows "in sorted SKU order
// (canon.Sorted), so multi-SKU orders never deadlock one another". The
// stock table is the application's own; on PostgreSQL its SKU column may
// carry the database's or another collation (here ICU's, where "a" sorts
// before "B", unlike in byte order). A Pessimistic Deduct of {a, B} that
// locks its rows with SELECT ... ORDER BY sku FOR UPDATE then takes them
// in the collation's order, while an Atomic Deduct of the same order
// updates them in byte order: the two close a lock cycle, which
// PostgreSQL breaks only at deadlock_timeout (1s). With the rows taken in
// one order the Pessimistic Deduct waits for the Atomic one (held 400ms)
// and both end within about that.
func TestOwnStockTableCollationKeepsOneLockOrder(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	for _, collation := range []string{`"C"`, `"und-x-icu"`} {
		t.Run(collation, func(t *testing.T) {
			b := backend{name: "postgres", dialect: sqlstock.Postgres, needs: []testdb.Server{testdb.Postgres},
				open: func(t testing.TB) *sqlx.DB { return testdb.PostgreSQL(t, 8) }}
			flakyDB, f := openFlaky(t, b)
			plain := testdb.PostgreSQL(t, 8)
			ctx := context.Background()
			table := testdb.Unique("colls")
			if _, err := plain.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku VARCHAR(128) COLLATE `+collation+` NOT NULL PRIMARY KEY,`+
				` available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,`+
				` per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)`); err != nil {
				t.Fatal(err)
			}
			cfg := sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, Ledger: testdb.Unique("colll"), MaxGroup: 1, LockWait: 5 * time.Second}
			atomic := newStoreOn(t, flakyDB.DB, cfg)
			cfg.Strategy = sqlstock.Pessimistic
			pessimistic, err := sqlstock.New(plain.DB, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, sku := range []string{"a", "B"} {
				if err := atomic.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
					t.Fatal(err)
				}
			}
			items := []stock.Item{{SKU: "a", Qty: 1}, {SKU: "B", Qty: 1}}
			// The Atomic Deduct's first take (of "B", first in byte order)
			// answers 400ms late, holding B's row.
			f.armLateExec(`UPDATE "`+table+`" SET "available" = "available" - `, 400*time.Millisecond)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			took := make([]time.Duration, 2)
			wg.Add(2)
			go func() {
				defer wg.Done()
				errs[0] = atomic.Deduct(ctx, stock.Order{ID: "o1", Items: items})
				took[0] = time.Since(start)
			}()
			go func() {
				defer wg.Done()
				time.Sleep(100 * time.Millisecond)
				errs[1] = pessimistic.Deduct(ctx, stock.Order{ID: "o2", Items: items})
				took[1] = time.Since(start)
			}()
			wg.Wait()
			t.Logf("atomic: %v after %v; pessimistic: %v after %v (late answers fired: %d)",
				errs[0], took[0].Round(time.Millisecond), errs[1], took[1].Round(time.Millisecond), f.lateFired.Load())
			if f.lateFired.Load() != 1 {
				t.Fatal("the late answer never fired")
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("deduct %d: %v", i, err)
				}
			}
			if slowest := max(took[0], took[1]); slowest > 900*time.Millisecond {
				t.Errorf("two Deducts of {a, B} took %v: they locked the rows in two orders and waited for PostgreSQL's deadlock check", slowest.Round(time.Millisecond))
			}
		})
	}
}

// On MariaDB (and MySQL) InnoDB locks the rows a statement finds in the
// index's order, the SKU column's collation's, whatever its ORDER BY: with
// latin1_bin, a binary collation the Store accepts, "Š" (cp1252 0x8A)
// comes before "é" (0xE9), in UTF-8's byte order after it. A Pessimistic
// Deduct of {Š, é} must take é's row first, as an Atomic Deduct does:
// while it waits for é (held by another transaction), Š's row is still
// free.
func TestOwnStockTableCollationKeepsOneLockOrderMariaDB(t *testing.T) {
	testdb.Need(t, testdb.MySQL)
	db := testdb.MariaDB(t, 4)
	ctx := context.Background()
	table := testdb.Unique("colls")
	if _, err := db.ExecContext(ctx, "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL PRIMARY KEY,"+
		" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
		" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
	cfg := sqlstock.Config{Dialect: sqlstock.MariaDB, Table: table, Ledger: testdb.Unique("colll"), MaxGroup: 1,
		LockWait: 3 * time.Second, Strategy: sqlstock.Pessimistic}
	s := newStoreOn(t, db.DB, cfg)
	const a, b = "\u0160", "\u00e9" // Š, é: byte order é, Š
	for _, sku := range []string{a, b} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "UPDATE `"+table+"` SET version = version + 1 WHERE sku = ?", b); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: a, Qty: 1}, {SKU: b, Qty: 1}}})
	}()
	time.Sleep(500 * time.Millisecond) // the Deduct now waits for é
	probe, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sku string
	perr := probe.QueryRowContext(ctx, "SELECT sku FROM `"+table+"` WHERE sku = ? FOR UPDATE NOWAIT", a).Scan(&sku)
	_ = probe.Rollback()
	_ = holder.Rollback()
	if err := <-done; err != nil && !errors.Is(err, stock.ErrContention) {
		t.Fatalf("deduct: %v", err)
	}
	if perr != nil {
		t.Errorf("while the Deduct of {Š, é} waited for é's row, Š's row was locked (%v): it locked the rows in the collation's order, not byte order", perr)
	}
}
