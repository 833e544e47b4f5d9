package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// refusingConnector refuses every dial while refuse is set, as a server at
// its max_connections does.
type refusingConnector struct {
	drv     driver.Driver
	dsn     string
	refuse  atomic.Bool  // refuse every dial
	refused atomic.Int64 // dials refused
}

func (c *refusingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.refuse.Load() {
		c.refused.Add(1)
		return nil, errors.New("FATAL: sorry, too many clients already (SQLSTATE 53300)")
	}
	return c.drv.Open(c.dsn)
}

func (c *refusingConnector) Driver() driver.Driver { return c.drv }

// Grouped Deducts whose connection's dial is refused (the server is at
// its max_connections) sent nothing: the outcome rule returns a refused
// dial "as it is" (matching neither stock.ErrUnknownOutcome nor
// stock.ErrContention), as a Deduct that went alone does, and the group
// does not redial the refusing server in a loop.
func TestGroupRefusedDialIsReturnedAsItIs(t *testing.T) {
	dsn := testdb.Need(t, testdb.Postgres)
	ctx := context.Background()
	conn := &refusingConnector{drv: stdlib.GetDefaultDriver(), dsn: dsn}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(3)
	db.SetMaxIdleConns(0)
	other := testdb.PostgreSQL(t, 2).DB

	const lw = 200 * time.Millisecond
	s := newStoreOn(t, db, sqlstock.Config{Dialect: sqlstock.Postgres, Table: testdb.Unique("rv5rs"), Ledger: testdb.Unique("rv5rl"), LockWait: lw})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100, HoldTTL: time.Hour, MaxHoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	table := quote(sqlstock.Postgres, s.Tables()[0])
	// Another process holds the row briefly, so the two Deducts that go
	// alone are in flight (with their connections) while others queue.
	x, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE sku = 'a' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	type res struct {
		id   string
		err  error
		took time.Duration
	}
	var (
		mu      sync.Mutex
		results []res
		wg      sync.WaitGroup
	)
	deduct := func(id string) {
		defer wg.Done()
		start := time.Now()
		err := s.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}})
		mu.Lock()
		results = append(results, res{id, err, time.Since(start)})
		mu.Unlock()
	}
	for i := range 2 {
		wg.Add(1)
		go deduct(fmt.Sprintf("alone-%d", i))
	}
	time.Sleep(30 * time.Millisecond)
	for i := range 4 {
		wg.Add(1)
		go deduct(fmt.Sprintf("queued-%d", i))
	}
	time.Sleep(30 * time.Millisecond)
	conn.refuse.Store(true) // the server takes no new connection from now
	if err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	n := conn.refused.Load()
	conn.refuse.Store(false)
	for _, r := range results {
		t.Logf("%s: %v after %v", r.id, r.err, r.took.Round(time.Millisecond))
		if len(r.id) > 6 && r.id[:6] == "queued" && (errors.Is(r.err, stock.ErrContention) || errors.Is(r.err, stock.ErrUnknownOutcome)) {
			t.Errorf("%s: a group whose dial was refused (nothing sent) answered %v; want the refused dial as it is", r.id, r.err)
		}
	}
	t.Logf("dials refused while the callers waited: %d", n)
	if n > 20 {
		t.Errorf("the group redialed the refusing server %d times in %v", n, 2*lw)
	}
}
