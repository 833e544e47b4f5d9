package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// BenchmarkDeduct measures each strategy deducting one unit per order, on
// one hot SKU and on 1,000 SKUs, at 8 and 64 parallel clients (one
// connection each), beside the raw statements in the same run:
//
//   - raw-update: UPDATE stock SET available = available - 1 WHERE sku = ?
//     AND available >= 1, autocommit;
//   - raw-ledger-tx: BEGIN; INSERT one ledger row; that UPDATE; COMMIT.
//
// and each strategy: atomic (grouped, the default), atomic-ungrouped
// (MaxGroup 1), optimistic and pessimistic.
//
// Each reports ok/s (successful deducts per second); the strategies also
// report x_raw_tx and x_raw_update, their ok/s over raw-ledger-tx's and
// raw-update's, and fail/op (the share of calls that failed,
// stock.ErrContention for Optimistic). MySQL DSNs get
// interpolateParams=true. Run (-count 3 and benchstat for medians):
//
//	go test -run '^$' -bench BenchmarkDeduct -benchtime 2s ./stock/sqlstock
func BenchmarkDeduct(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			db := benchOpen(b, be)
			for _, skus := range []int{1, 1000} {
				b.Run(fmt.Sprintf("skus=%d", skus), func(b *testing.B) {
					for _, clients := range []int{8, 64} {
						b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
							db.SetMaxOpenConns(clients)
							db.SetMaxIdleConns(clients)
							var rawTx, rawUpdate float64
							b.Run("raw-update", func(b *testing.B) {
								cfg, names := benchTables(b, db, be, skus)
								q := db.Rebind("UPDATE " + quote(be.dialect, cfg.Table) + " SET available = available - 1 WHERE sku = ? AND available >= 1")
								rawUpdate = runClients(b, clients, names, func(ctx context.Context, _ string, sku string) error {
									_, err := db.ExecContext(ctx, q, sku)
									return err
								})
							})
							b.Run("raw-ledger-tx", func(b *testing.B) {
								cfg, names := benchTables(b, db, be, skus)
								ins := db.Rebind("INSERT INTO " + quote(be.dialect, cfg.Ledger) +
									" (order_id, line, sku, qty, user_id, state, deadline_ms, created_ms) VALUES (?, 0, ?, 1, '', 1, ?, ?)")
								upd := db.Rebind("UPDATE " + quote(be.dialect, cfg.Table) + " SET available = available - 1 WHERE sku = ? AND available >= 1")
								rawTx = runClients(b, clients, names, func(ctx context.Context, id, sku string) error {
									return rawLedgerTx(ctx, db, ins, upd, id, sku)
								})
							})
							for _, v := range benchVariants {
								b.Run(v.name, func(b *testing.B) {
									cfg, names := benchTables(b, db, be, skus)
									cfg.Strategy, cfg.MaxGroup = v.st, v.maxGroup
									s, err := sqlstock.New(db.DB, cfg)
									if err != nil {
										b.Fatal(err)
									}
									ok := runClients(b, clients, names, func(ctx context.Context, id, sku string) error {
										return s.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: sku, Qty: 1}}})
									})
									if rawTx > 0 {
										b.ReportMetric(ok/rawTx, "x_raw_tx")
									}
									if rawUpdate > 0 {
										b.ReportMetric(ok/rawUpdate, "x_raw_update")
									}
								})
							}
						})
					}
				})
			}
		})
	}
}

// benchVariants are the Stores BenchmarkDeduct measures.
var benchVariants = []struct {
	name     string
	st       sqlstock.Strategy
	maxGroup int
}{
	{"atomic", sqlstock.Atomic, 0},
	{"atomic-ungrouped", sqlstock.Atomic, 1},
	{"optimistic", sqlstock.Optimistic, 0},
	{"pessimistic", sqlstock.Pessimistic, 0},
}

// benchTables creates fresh tables for one measurement, so that no case
// runs on a table (or a hot row's dead versions) another case grew, and
// puts skus SKUs on sale with more units than any run takes. table names
// a stock table of the caller's to use instead of a fresh one.
func benchTables(b *testing.B, db *sqlx.DB, be backend, skus int, table ...string) (sqlstock.Config, []string) {
	cfg := sqlstock.Config{Dialect: be.dialect, Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")}
	if len(table) > 0 {
		cfg.Table = table[0]
	}
	newStore(b, db, cfg)
	names := make([]string, skus)
	rows := make([]string, skus)
	args := make([]any, 0, skus)
	for i := range names {
		names[i] = fmt.Sprintf("sku-%d", i)
		rows[i] = "(?, 1099511627776)"
		args = append(args, names[i])
	}
	q := db.Rebind("INSERT INTO " + quote(be.dialect, cfg.Table) + " (sku, available) VALUES " + strings.Join(rows, ", "))
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		b.Fatal(err)
	}
	return cfg, names
}

// runClients runs op b.N times from clients goroutines, each call with a
// fresh order ID and a random SKU of names, and reports ok/s and fail/op.
// It returns ok/s.
func runClients(b *testing.B, clients int, names []string, op func(ctx context.Context, id, sku string) error) float64 {
	b.ReportAllocs()
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	run := testdb.Unique("o")
	var seq, ok, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			n := seq.Add(1)
			sku := names[0]
			if len(names) > 1 {
				sku = names[rand.IntN(len(names))]
			}
			if err := op(ctx, run+"-"+fmt.Sprint(n), sku); err != nil {
				failed.Add(1)
				if !errors.Is(err, stock.ErrContention) {
					firstErr.CompareAndSwap(nil, err)
				}
				continue
			}
			ok.Add(1)
		}
	})
	elapsed := time.Since(start).Seconds()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatalf("deduct: %v", err)
	}
	rate := float64(ok.Load()) / elapsed
	b.ReportMetric(rate, "ok/s")
	b.ReportMetric(float64(failed.Load())/float64(max(1, seq.Load())), "fail/op")
	return rate
}

func rawLedgerTx(ctx context.Context, db *sqlx.DB, ins, upd, id, sku string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	if _, err := tx.ExecContext(ctx, ins, id, sku, now+60_000, now); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, upd, sku)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("raw update changed %d rows: %v", n, err)
	}
	return tx.Commit()
}

// benchOpen opens be's database for benchmarks (MySQL with
// interpolateParams=true: no prepare round trip; SQLite in WAL mode).
func benchOpen(b *testing.B, be backend) *sqlx.DB { return be.open(b) }

// BenchmarkPessimisticLockOrder measures Pessimistic Deducts of three
// SKUs (of 1,000, at 8 clients) on MariaDB over a stock table whose SKU
// column sorts in UTF-8's byte order (utf8mb4_bin: the rows locked with
// one statement) and over one that does not (latin1_bin, a binary
// collation of another charset: one statement a row), and reports x_row_by_row, the first's ok/s over the
// second's, in the same run:
//
//	go test -run '^$' -bench BenchmarkPessimisticLockOrder -benchtime 2s -count 3 ./stock/sqlstock
func BenchmarkPessimisticLockOrder(b *testing.B) {
	db := testdb.MariaDB(b, 8)
	const clients = 8
	db.SetMaxOpenConns(clients)
	db.SetMaxIdleConns(clients)
	var rowByRow float64
	for _, collation := range []string{"latin1_bin", "utf8mb4_bin"} {
		b.Run(collation, func(b *testing.B) {
			table := testdb.Unique("lbs")
			if _, err := db.ExecContext(context.Background(), "CREATE TABLE `"+table+"` (sku VARCHAR(128) CHARACTER SET "+strings.SplitN(collation, "_", 2)[0]+" COLLATE "+collation+" NOT NULL PRIMARY KEY,"+
				" available BIGINT NOT NULL, held BIGINT NOT NULL DEFAULT 0, sold BIGINT NOT NULL DEFAULT 0, version BIGINT NOT NULL DEFAULT 0,"+
				" per_user_limit BIGINT NOT NULL DEFAULT 0, hold_ttl_ms BIGINT NOT NULL DEFAULT 600000, max_hold_ttl_ms BIGINT NOT NULL DEFAULT 0)"); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS `"+table+"`") })
			cfg, names := benchTables(b, db, backend{dialect: sqlstock.MariaDB}, 1000, table)
			cfg.Strategy = sqlstock.Pessimistic
			s, err := sqlstock.New(db.DB, cfg)
			if err != nil {
				b.Fatal(err)
			}
			index := make(map[string]int, len(names))
			for i, n := range names {
				index[n] = i
			}
			ok := runClients(b, clients, names, func(ctx context.Context, id, sku string) error {
				i := index[sku]
				items := []stock.Item{{SKU: sku, Qty: 1}, {SKU: names[(i+1)%len(names)], Qty: 1}, {SKU: names[(i+2)%len(names)], Qty: 1}}
				return s.Deduct(ctx, stock.Order{ID: id, UserID: "u-" + id, Items: items})
			})
			if collation != "utf8mb4_bin" {
				rowByRow = ok
			} else if rowByRow > 0 {
				b.ReportMetric(ok/rowByRow, "x_row_by_row")
			}
		})
	}
}
