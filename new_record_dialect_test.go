package stockguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// stockguard.New: "It fails with an error wrapping stock.ErrInvalid, having
// built nothing, for ... a driver whose dialect it cannot tell, ... and
// settings that contradict each other." Config.Record: "A zero Dialect is
// found from the driver ...; set it for a driver sqlstock.New cannot tell
// (one wrapped for tracing)." README, "the SQL dialect" row: "leave
// sqlstock.Config.Dialect zero (set it for a wrapped driver); one the server
// contradicts is refused"; the error table: "stock.ErrInvalid | bad input or
// a contradictory wiring; nothing was written".
//
// A Record.Dialect that contradicts a driver New can tell (pgx, modernc's
// sqlite, go-sql-driver/mysql) is such a contradiction, and is refused with
// stock.ErrInvalid before anything is written (it used to be taken, and
// every call then failed with the server's raw syntax error, which matches
// no stock error: the shop looked like a database outage, not like the
// wiring mistake it is). The mysql driver with MySQL on a MariaDB server
// is refused at the first call. The test accepts the refusal at New or at
// the first call (CreateTables).
func TestNewRefusesARecordDialectTheDriverContradicts(t *testing.T) {
	for _, db := range testdb.All() {
		for _, d := range []sqlstock.Dialect{sqlstock.MySQL, sqlstock.MariaDB, sqlstock.Postgres, sqlstock.SQLite} {
			if d == db.Dialect {
				continue
			}
			t.Run(db.Name+" driver, Dialect "+d.String(), func(t *testing.T) {
				testdb.Need(t, db.Needs...)
				mr := miniredis.RunT(t)
				rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
				t.Cleanup(func() { _ = rdb.Close() })
				x := db.Open(t, 4)
				table, ledger := testdb.Unique("sgdialect_stock"), testdb.Unique("sgdialect_ledger")
				shop, err := stockguard.New(rdb, x.DB, stockguard.Config{Record: sqlstock.Config{Dialect: d, Table: table, Ledger: ledger}})
				if err != nil {
					if !errors.Is(err, stock.ErrInvalid) {
						t.Fatalf("New: %v, want an error wrapping stock.ErrInvalid", err)
					}
					return
				}
				t.Cleanup(shop.Close)
				t.Cleanup(func() {
					for _, n := range shop.Record().Tables() {
						_, _ = x.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+n)
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := shop.CreateTables(ctx); !errors.Is(err, stock.ErrInvalid) {
					t.Fatalf("New took Record.Dialect %v over a %s driver; then CreateTables: %v, want an error wrapping stock.ErrInvalid naming the dialect",
						d, db.Name, err)
				}
			})
		}
	}
}
