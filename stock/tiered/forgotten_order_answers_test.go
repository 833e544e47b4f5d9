package tiered_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// retentionShop is a flow over a miniredis gate that forgets ended
// orders after redisstock.MinRetention (as it does after its default
// Retention of a day) and a SQLite record, which keeps them.
type retentionShop struct {
	m     *tiered.Manager
	mr    *miniredis.Miniredis
	rdb   *redis.Client
	clock *stocktest.Clock
}

func newRetentionShop(t *testing.T) *retentionShop {
	t.Helper()
	s := &retentionShop{mr: miniredis.RunT(t), clock: stocktest.NewClock(stocktest.Epoch)}
	s.rdb = redis.NewClient(&redis.Options{Addr: s.mr.Addr()})
	t.Cleanup(func() { _ = s.rdb.Close() })
	s.mr.SetTime(stocktest.Epoch)
	gate, err := redisstock.New(s.rdb, redisstock.Config{Clock: s.clock, Prefix: testdb.Unique("zr"), Retention: redisstock.MinRetention})
	if err != nil {
		t.Fatal(err)
	}
	record, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Clock: s.clock, Table: testdb.Unique("zrs"), Ledger: testdb.Unique("zrl")})
	if err != nil {
		t.Fatal(err)
	}
	if err := record.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.m = tiered.New(gate, record, tiered.Config{Clock: s.clock})
	return s
}

// elapse moves both clocks (the flow's and the gate server's).
func (s *retentionShop) elapse(d time.Duration) {
	s.clock.Advance(d)
	s.mr.SetTime(s.clock.Now())
	s.mr.FastForward(d)
}

func isErr(t *testing.T, got, want error, what string) {
	t.Helper()
	if !errors.Is(got, want) || (want == nil && got != nil) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// A plain Revert of a held order: Orders says reverted, Confirm
// stock.ErrOrderClosed. Once the gate has forgotten the ended order (past
// its gate deadline, after a reclaim pass), Orders still says reverted and
// Confirm still answers stock.ErrOrderClosed, as on every backend: the
// answer is final and agrees with Orders.
func TestPlainRevertConfirmAnswerIsFinal(t *testing.T) {
	s := newRetentionShop(t)
	ctx := t.Context()
	if err := s.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := s.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	isErr(t, s.m.Revert(ctx, "o1"), nil, "Revert")
	isErr(t, s.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm after Revert")
	s.elapse(5 * time.Minute)
	if _, err := s.m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	st := stateOf(t, s.m, "o1")
	err := s.m.Confirm(ctx, "o1")
	if st != stock.StateReverted || !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("once the gate forgot the ended order: Orders %v, Confirm %v; want reverted and ErrOrderClosed", st, err)
	}
}
