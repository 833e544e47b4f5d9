package sqlstock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A call that never got a connection sent nothing: on PostgreSQL the
// one-statement Deduct and ExtendHold, whose statement's wait is bounded by
// LockWait through its context, must not answer stock.ErrUnknownOutcome
// when that context ended while they were still waiting for a connection
// of a busy pool. The package's outcome rule: "An error from before any
// write was sent ... is returned as it is and matches neither
// stock.ErrUnknownOutcome nor stock.ErrContention"; a call that applied
// nothing is stock.ErrContention at most.
func TestNoConnectionIsNotAnUnknownOutcome(t *testing.T) {
	testdb.Need(t, testdb.Postgres)
	db := testdb.PostgreSQL(t, 1).DB
	ctx := context.Background()
	s := newStoreOn(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: testdb.Unique("nocs"), Ledger: testdb.Unique("nocl"),
		LockWait: time.Second, MaxGroup: 1})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Deduct(ctx, stock.Order{ID: "held", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
		t.Fatal(err)
	}
	// The application's own work holds the pool's only connection for
	// longer than the Store's bound.
	busy, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := time.AfterFunc(5*time.Second, func() { _ = busy.Close() })
	defer free.Stop()

	calls := []struct {
		name string
		f    func() error
	}{
		{"Deduct", func() error {
			return s.Deduct(ctx, stock.Order{ID: "new", Items: []stock.Item{{SKU: "a", Qty: 1}}})
		}},
		{"ExtendHold", func() error { return s.ExtendHold(ctx, "held", time.Now().Add(30*time.Minute)) }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.f()
		t.Logf("%s with no free connection: %v after %v", c.name, err, time.Since(start).Round(time.Millisecond))
		if errors.Is(err, stock.ErrUnknownOutcome) {
			t.Errorf("%s that never got a connection (nothing sent) answered %v; want an error that is not stock.ErrUnknownOutcome", c.name, err)
		}
	}
	_ = busy.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+quote(sqlstock.Postgres, s.Tables()[1])+" WHERE order_id = 'new'").Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the Deduct wrote %d ledger lines", n)
	}
}
