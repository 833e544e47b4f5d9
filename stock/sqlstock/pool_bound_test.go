package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Every Deduct answers within Store.AnswerBound, grouped or not, also
// when the pool has no free connection for longer than that, and one that
// applied nothing (stock.ErrContention) within two LockWaits: a Deduct
// that runs alone gives up waiting for a connection (nothing sent); one
// queued for a group must not wait for its group's connection past its
// own bound.
func TestDeductAnswersWithinTheBoundWhenThePoolIsBusy(t *testing.T) {
	const lockWait = time.Second
	for _, b := range backends() {
		for _, group := range []int{1, 0} {
			t.Run(fmt.Sprintf("%s/group%d", b.name, group), func(t *testing.T) {
				b.need(t)
				var db *sql.DB
				switch b.dialect {
				case sqlstock.Postgres:
					db = testdb.PostgreSQL(t, 2).DB
				case sqlstock.MariaDB:
					db = testdb.MariaDB(t, 2).DB
				default:
					db = b.open(t).DB
					db.SetMaxOpenConns(2)
				}
				ctx := context.Background()
				s := newStoreOn(t, db, sqlstock.Config{Dialect: b.dialect, Table: testdb.Unique("pbs"), Ledger: testdb.Unique("pbl"),
					LockWait: lockWait, MaxGroup: group})
				if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
					t.Fatal(err)
				}
				// The application's own work takes both connections of the
				// pool for eight seconds.
				var conns []*sql.Conn
				for range 2 {
					c, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					conns = append(conns, c)
				}
				var once sync.Once
				free := func() {
					once.Do(func() {
						for _, c := range conns {
							_ = c.Close()
						}
					})
				}
				time.AfterFunc(8*time.Second, free)
				defer free()
				var (
					wg    sync.WaitGroup
					mu    sync.Mutex
					worst time.Duration
					errs  = map[string]int{}
				)
				for i := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(time.Duration(i) * 20 * time.Millisecond)
						cctx := ctx
						if i < 2 {
							// The first two callers (who go at once, alone)
							// give up after half a second.
							var cancel context.CancelFunc
							cctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
							defer cancel()
						}
						start := time.Now()
						err := s.Deduct(cctx, stock.Order{ID: fmt.Sprintf("o%d", i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
						took := time.Since(start)
						mu.Lock()
						defer mu.Unlock()
						worst = max(worst, took)
						errs[fmt.Sprint(err)]++
						if errors.Is(err, stock.ErrContention) && took > 2*lockWait+300*time.Millisecond {
							t.Errorf("Deduct o%d applied nothing (%v) and answered after %v; a call that applied nothing answers within two LockWaits (%v)",
								i, err, took.Round(time.Millisecond), 2*lockWait)
						}
						if took > s.AnswerBound()+300*time.Millisecond {
							t.Errorf("Deduct o%d answered after %v (%v); AnswerBound is %v", i, took.Round(time.Millisecond), err, s.AnswerBound())
						}
					}()
				}
				wg.Wait()
				t.Logf("slowest answer %v; answers %v", worst.Round(time.Millisecond), errs)
			})
		}
	}
}

// A Store's first call on MariaDB asks the server which it is (SELECT
// VERSION()) before anything else; that question must not wait for a
// connection past the call's bound either.
func TestFirstCallAnswersWithinTheBoundWhenThePoolIsBusy(t *testing.T) {
	testdb.Need(t, testdb.MySQL)
	db := testdb.MariaDB(t, 1).DB
	ctx := context.Background()
	cfg := sqlstock.Config{Table: testdb.Unique("pbs"), Ledger: testdb.Unique("pbl"), LockWait: time.Second}
	setup := newStoreOn(t, db, cfg)
	if err := setup.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
		t.Fatal(err)
	}
	s, err := sqlstock.New(db, cfg) // a new process's Store on the same tables
	if err != nil {
		t.Fatal(err)
	}
	busy, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	free := func() { once.Do(func() { _ = busy.Close() }) }
	time.AfterFunc(8*time.Second, free)
	defer free()
	start := time.Now()
	err = s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	took := time.Since(start)
	t.Logf("first Deduct of a Store with no free connection: %v after %v", err, took.Round(time.Millisecond))
	if errors.Is(err, stock.ErrUnknownOutcome) {
		t.Errorf("first Deduct that never got a connection answered %v", err)
	}
	if took > s.AnswerBound()+300*time.Millisecond {
		t.Errorf("first Deduct answered after %v (%v); AnswerBound is %v", took.Round(time.Millisecond), err, s.AnswerBound())
	}
}
