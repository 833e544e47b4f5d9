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

// zzRetentionShop is a flow over a miniredis gate that forgets ended
// orders after redisstock.MinRetention (as it does after its default
// Retention of a day) and a SQLite record, which keeps them.
type zzRetentionShop struct {
	m     *tiered.Manager
	mr    *miniredis.Miniredis
	rdb   *redis.Client
	clock *stocktest.Clock
}

func newZZRetentionShop(t *testing.T) *zzRetentionShop {
	t.Helper()
	s := &zzRetentionShop{mr: miniredis.RunT(t), clock: stocktest.NewClock(stocktest.Epoch)}
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
func (s *zzRetentionShop) elapse(d time.Duration) {
	s.clock.Advance(d)
	s.mr.SetTime(s.clock.Now())
	s.mr.FastForward(d)
}

func zzIs(t *testing.T, got, want error, what string) {
	t.Helper()
	if !errors.Is(got, want) || (want == nil && got != nil) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

func zzState(t *testing.T, m stock.OrderReader, id string) stock.State {
	t.Helper()
	in, err := m.Orders(t.Context(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return in[0].State
}

// A Confirm racing a Revert (the Revert closed the order at the gate, the
// Confirm returned the record's copy, the Revert finished) answers
// stock.ErrOrderClosed, and the order reads reverted: the doc says that
// answer is final. Once the gate has forgotten the ended order (its
// Retention, a day by default) the record alone answers, and it says
// expired: Orders turns from reverted to expired, Confirm from
// ErrOrderClosed to ErrHoldExpired, and a repeat Deduct answers
// ErrHoldExpired where memstock answers ErrOrderClosed for a reverted
// order.
func TestZZRevertedByRaceStaysReverted(t *testing.T) {
	s := newZZRetentionShop(t)
	ctx := t.Context()
	if err := s.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := s.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	// Revert, step one (the gate), then a Confirm runs, then the Revert
	// goes on (here: its retry after it stopped between the two).
	if err := s.m.Gate().Revert(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	zzIs(t, s.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm racing the Revert")
	zzIs(t, s.m.Revert(ctx, "o1"), nil, "the Revert goes on")
	if st := zzState(t, s.m, "o1"); st != stock.StateReverted {
		t.Fatalf("Orders right after: %v, want reverted", st)
	}
	zzIs(t, s.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm again")

	// A day later (here: past the gate's Retention).
	s.elapse(5 * time.Minute)
	if _, err := s.m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if st := zzState(t, s.m, "o1"); st != stock.StateReverted {
		t.Errorf("Orders once the gate forgot the ended order: %v, want reverted (as before)", st)
	}
	zzIs(t, s.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm once the gate forgot the ended order")
	zzIs(t, s.m.Deduct(ctx, o), stock.ErrOrderClosed, "repeat Deduct of the reverted order (memstock: ErrOrderClosed)")
}

// A plain Revert of a held order: Orders says reverted, Confirm
// stock.ErrOrderClosed. Once the gate has forgotten the ended order, Orders
// still says reverted but Confirm answers ErrHoldExpired (closedReason
// takes a reverted record copy past its gate deadline for a reclaimed one),
// so the answer changes and contradicts Orders.
func TestZZPlainRevertConfirmAnswerIsFinal(t *testing.T) {
	s := newZZRetentionShop(t)
	ctx := t.Context()
	if err := s.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := s.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	zzIs(t, s.m.Revert(ctx, "o1"), nil, "Revert")
	zzIs(t, s.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm after Revert")
	s.elapse(5 * time.Minute)
	if _, err := s.m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	st := zzState(t, s.m, "o1")
	err := s.m.Confirm(ctx, "o1")
	if st != stock.StateReverted || !errors.Is(err, stock.ErrOrderClosed) {
		t.Errorf("once the gate forgot the ended order: Orders %v, Confirm %v; want reverted and ErrOrderClosed (memstock)", st, err)
	}
}

// The same race, then a node whose breaker sends calls to the record
// alone (package degrade's fallback): it answers the reverted order
// expired, where the flow on another node answers it closed.
func TestZZRevertedByRaceFallbackAgrees(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	if err := f.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := f.m.Deduct(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.Revert(ctx, "o1"); err != nil { // the Revert's gate step
		t.Fatal(err)
	}
	zzIs(t, f.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm racing the Revert")
	zzIs(t, f.m.Revert(ctx, "o1"), nil, "the Revert goes on")
	zzIs(t, f.m.Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm through the flow")
	zzIs(t, f.m.Fallback().Confirm(ctx, "o1"), stock.ErrOrderClosed, "Confirm through the fallback")
	if in, err := f.m.Fallback().Orders(ctx, []string{"o1"}); err != nil || in[0].State != stock.StateReverted {
		t.Errorf("fallback Orders: %v, %v; want reverted (the flow's Orders says so)", in, err)
	}
}
