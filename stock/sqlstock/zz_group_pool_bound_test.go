package sqlstock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// A Store's first call on MariaDB asks the server which it is (SELECT
// VERSION()) before anything else; that question must not wait for a
// connection past the call's bound either.
func TestZZFirstCallAnswersWithinTheBoundWhenThePoolIsBusy(t *testing.T) {
	testdb.Need(t, testdb.MySQL)
	db := testdb.MariaDB(t, 1).DB
	ctx := context.Background()
	cfg := sqlstock.Config{Table: testdb.Unique("rv3s"), Ledger: testdb.Unique("rv3l"), LockWait: time.Second}
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
	if took > s.AnswerBound()+300*time.Millisecond {
		t.Errorf("first Deduct answered after %v (%v); AnswerBound is %v", took.Round(time.Millisecond), err, s.AnswerBound())
	}
}
