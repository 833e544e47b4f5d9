package sqlstock_test

import (
	"context"
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
func TestZZOwnStockTableCollationKeepsOneLockOrder(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	for _, collation := range []string{`"C"`, `"und-x-icu"`} {
		t.Run(collation, func(t *testing.T) {
			b := backend{name: "postgres", dialect: sqlstock.Postgres, needs: []testdb.Server{testdb.Postgres},
				open: func(t testing.TB) *sqlx.DB { return testdb.PostgreSQL(t, 8) }}
			flakyDB, f := openFlaky(t, b)
			plain := testdb.PostgreSQL(t, 8)
			ctx := context.Background()
			table := testdb.Unique("rv3s")
			if _, err := plain.ExecContext(ctx, `CREATE TABLE "`+table+`" (sku VARCHAR(128) COLLATE `+collation+` NOT NULL PRIMARY KEY,`+
				` available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,`+
				` per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)`); err != nil {
				t.Fatal(err)
			}
			cfg := sqlstock.Config{Dialect: sqlstock.Postgres, Table: table, Ledger: testdb.Unique("rv3l"), MaxGroup: 1, LockWait: 5 * time.Second}
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
