package memstock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A hold whose deadline has passed is expired, reclaimed or not (the
// stock doc's Deduct and Confirm). A Revert of an expired order "returns
// nil and changes nothing": the repeat Deduct and Confirm that answered
// ErrHoldExpired before the Revert answer it after it, and Orders reports
// the order expired, as redisstock does.
func TestRevertOfDueHoldKeepsItExpired(t *testing.T) {
	type reader interface {
		stock.Manager
		stock.OrderReader
	}
	for _, b := range []struct {
		name string
		new  func(*testing.T, *stocktest.Clock) reader
	}{
		{"memstock", func(t *testing.T, c *stocktest.Clock) reader { return newMem(t, c) }},
		{"redisstock", func(t *testing.T, c *stocktest.Clock) reader { return newRedis(t, c) }},
		{"sqlstock-sqlite", func(t *testing.T, c *stocktest.Clock) reader { return newSQLite(t, c) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			c := stocktest.NewClock(stocktest.Epoch)
			m := b.new(t, c)
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Second}); err != nil {
				t.Fatal(err)
			}
			o := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}
			if err := m.Deduct(ctx, o); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Second) // the deadline is now; no reclaimer ran
			if err := m.Deduct(ctx, o); !errors.Is(err, stock.ErrHoldExpired) {
				t.Fatalf("repeat Deduct at the deadline: %v, want ErrHoldExpired", err)
			}
			if err := m.Revert(ctx, "o1"); err != nil {
				t.Fatalf("Revert: %v", err)
			}
			if err := m.Deduct(ctx, o); !errors.Is(err, stock.ErrHoldExpired) {
				t.Errorf("repeat Deduct after the Revert: %v, want ErrHoldExpired (the Revert changed the order)", err)
			}
			if err := m.Confirm(ctx, "o1"); !errors.Is(err, stock.ErrHoldExpired) {
				t.Errorf("Confirm after the Revert: %v, want ErrHoldExpired", err)
			}
			infos, err := m.Orders(ctx, []string{"o1"})
			if err != nil {
				t.Fatal(err)
			}
			if infos[0].State != stock.StateExpired {
				t.Errorf("Orders: state %v, want expired", infos[0].State)
			}
			if lv, _ := m.Levels(ctx, "a"); lv.Available != 5 || lv.Held != 0 {
				t.Errorf("levels %+v, want 5 available, 0 held", lv)
			}
		})
	}
}

// The same sequence through the composed flow, with a memstock record:
// the flow's answers must not depend on which shipped gate it runs on.
func TestTieredRevertOfDueHoldSameOnEveryGate(t *testing.T) {
	answers := map[string][]string{}
	for _, b := range []struct {
		name string
		new  func(*testing.T, *stocktest.Clock) gate
	}{{"memstock", newMem}, {"redisstock", newRedis}} {
		ctx := context.Background()
		c := stocktest.NewClock(stocktest.Epoch)
		m := tiered.New(gateStore(t, b.new(t, c)), memstock.New(c), tiered.Config{Clock: c})
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		o := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}
		if err := m.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second) // the gate's deadline; the record's is later
		var got []string
		got = append(got, "revert: "+class(m.Revert(ctx, "o1")))
		got = append(got, "deduct: "+class(m.Deduct(ctx, o)))
		got = append(got, "confirm: "+class(m.Confirm(ctx, "o1")))
		infos, err := m.Orders(ctx, []string{"o1"})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, "state: "+infos[0].State.String())
		answers[b.name] = got
	}
	mem, red := answers["memstock"], answers["redisstock"]
	for i := range mem {
		if mem[i] != red[i] {
			t.Errorf("memstock gate %q, redisstock gate %q", mem[i], red[i])
		}
	}
}

// newSQLite is sqlstock's atomic-UPDATE backend on SQLite.
func newSQLite(t *testing.T, c *stocktest.Clock) *sqlstock.Store {
	var db *sql.DB = testdb.SQLite(t, 4).DB
	s, err := sqlstock.New(db, sqlstock.Config{Dialect: sqlstock.SQLite, Clock: c, Table: testdb.Unique("revstock"), Ledger: testdb.Unique("revledger")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}
