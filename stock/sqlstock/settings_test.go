package sqlstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// A Store's remembered settings may make a call faster, never refuse it:
// after another Store changed a SKU's limit or hold time, the order is
// taken with the row's own settings, on the first attempt.
func TestStaleSettingsNeverRefuse(t *testing.T) {
	forEach(t, func(t *testing.T, b backend, st sqlstock.Strategy) {
		db := b.open(t)
		clock := stocktest.NewClock(stocktest.Epoch)
		cfg := sqlstock.Config{Dialect: b.dialect, Strategy: st, Clock: clock, MaxAttempts: 1,
			Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")}
		a := newStore(t, db, cfg)
		other, err := sqlstock.New(db.DB, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		put := func(s *sqlstock.Store, l stock.Listing) {
			t.Helper()
			if err := s.PutOnSale(ctx, l); err != nil {
				t.Fatalf("PutOnSale(%+v): %v", l, err)
			}
		}
		deadline := func(id string) time.Time {
			t.Helper()
			got, err := a.Orders(ctx, []string{id})
			if err != nil || len(got) != 1 || got[0].State != stock.StateHeld {
				t.Fatalf("Orders(%s) = %+v, %v", id, got, err)
			}
			return got[0].Deadline
		}

		// a remembers a per-user limit the other Store then lifts.
		put(a, stock.Listing{SKU: "lifted", Units: 10, PerUserLimit: 2, HoldTTL: time.Minute})
		put(other, stock.Listing{SKU: "lifted", Units: 10, HoldTTL: time.Hour})
		if err := a.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "lifted", Qty: 1}}}); err != nil {
			t.Fatalf("user-less Deduct after the limit was lifted elsewhere: %v", err)
		}
		if got, want := deadline("o1"), clock.Now().Add(time.Hour); !got.Equal(want) {
			t.Fatalf("deadline %v, want %v (the row's hold time)", got, want)
		}

		// a remembers no limit; the other Store sets one and another hold time.
		put(a, stock.Listing{SKU: "limited", Units: 10, HoldTTL: time.Minute})
		put(other, stock.Listing{SKU: "limited", Units: 10, PerUserLimit: 3, HoldTTL: time.Hour})
		if err := a.Deduct(ctx, stock.Order{ID: "o2", UserID: "u1", Items: []stock.Item{{SKU: "limited", Qty: 2}}}); err != nil {
			t.Fatalf("Deduct after a limit was set elsewhere: %v", err)
		}
		if got, want := deadline("o2"), clock.Now().Add(time.Hour); !got.Equal(want) {
			t.Fatalf("deadline %v, want %v (the row's hold time)", got, want)
		}
		// The new limit holds, and a user-less order is refused by it.
		if err := a.Deduct(ctx, stock.Order{ID: "o3", UserID: "u1", Items: []stock.Item{{SKU: "limited", Qty: 2}}}); !errors.Is(err, stock.ErrLimitReached) {
			t.Fatalf("Deduct past the new limit: %v, want stock.ErrLimitReached", err)
		}
		if err := a.Deduct(ctx, stock.Order{ID: "o4", Items: []stock.Item{{SKU: "limited", Qty: 1}}}); !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("user-less Deduct of a limited SKU: %v, want stock.ErrInvalid", err)
		}
		for sku, want := range map[string]stock.Levels{"lifted": {Available: 9, Held: 1}, "limited": {Available: 8, Held: 2}} {
			lv, err := a.Levels(ctx, sku)
			if err != nil || lv.Available != want.Available || lv.Held != want.Held {
				t.Fatalf("%s: levels %+v, %v; want %d available, %d held", sku, lv, err, want.Available, want.Held)
			}
		}
	})
}
