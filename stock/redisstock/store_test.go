package redisstock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func TestNewValidatesConfig(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, cfg := range []redisstock.Config{
		{Prefix: "a{b}"},
		{Prefix: "a b"},
		{Retention: -time.Second},
	} {
		if _, err := redisstock.New(c, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := redisstock.New(nil, redisstock.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("New(nil): %v, want ErrInvalid", err)
	}
	if _, err := redisstock.New(c, redisstock.Config{}); err != nil {
		t.Fatalf("New with the zero Config: %v", err)
	}
}

func TestUnreachableIsCertainFailure(t *testing.T) {
	// Nothing listens on port 1: the request is never sent, so the
	// outcome is known (nothing happened) and not a business one.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	s, err := redisstock.New(c, redisstock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Deduct(t.Context(), ord("o1", "", it("a", 1)))
	if err == nil || errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
		t.Fatalf("Deduct against no server: %v, want a certain infrastructure failure", err)
	}
}

// A line record and a directory entry live as long as the order holds
// stock, then Retention more, by the Store's clock: they read as absent
// after that, and the reclaimer's next pass deletes them.
func TestRecordsExpireAfterRetention(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it("a", 1))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u1", it("a", 2))), nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm")
		stored := func() int64 { // records and entries stored, read or not
			n := fx.c.HLen(fx.ctx(), fx.s.LinesKey("a")).Val()
			for _, k := range []string{fx.s.DirKey("held"), fx.s.DirKey("paid")} {
				n += fx.c.HLen(fx.ctx(), k).Val()
			}
			if fx.s.DirKey("held") == fx.s.DirKey("paid") {
				n -= fx.c.HLen(fx.ctx(), fx.s.DirKey("held")).Val()
			}
			return n
		}
		if n := stored(); n != 4 {
			t.Fatalf("%d records and entries, want 4", n)
		}
		// Within retention a retry is still idempotent.
		elapse(fx, time.Hour-time.Second)
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u1", it("a", 2))), nil, "retried Deduct")
		fx.want("a", 7, 1, 2)
		// A held record has no end: the hold keeps its record, whatever the
		// time, until it is returned; then it lives Retention more.
		elapse(fx, stock.DefaultHoldTTL+time.Minute)
		if !fx.hasRecord("a", "held") || fx.entryTTL("held") != -1 {
			t.Fatal("the held order lost its record or its entry before it was returned")
		}
		if fx.hasRecord("a", "paid") || fx.entryTTL("paid") != -2 {
			t.Fatal("the paid order's record or entry reads past its retention")
		}
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(got) != 1 || got[0].OrderID != "held" {
			t.Fatalf("ReclaimExpired = %+v, %v; want the held order", got, err)
		}
		fx.want("a", 8, 0, 2)
		if n := stored(); n != 2 {
			t.Fatalf("%d records and entries after the pass, want the held order's 2", n)
		}
		elapse(fx, time.Hour-time.Second)
		if !fx.hasRecord("a", "held") || fx.entryTTL("held") <= 0 {
			t.Fatal("the expired order's record or entry is gone within its retention")
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it("a", 1))), stock.ErrHoldExpired, "retried Deduct of the expired order")
		elapse(fx, time.Second)
		if _, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil {
			t.Fatal(err)
		}
		if n := stored(); n != 0 {
			t.Fatalf("%d records and entries left after retention", n)
		}
		// Counts are untouched by the records' end.
		fx.want("a", 8, 0, 2)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u2", it("a", 3))), nil, "the ID, free again")
	})
}

func TestInspectAdjustHeldOrders(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 5, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("a", 3))), nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "o2"), nil, "Confirm")

		st, err := fx.s.Inspect(fx.ctx(), []string{"a", "nope"})
		if err != nil || len(st) != 2 {
			t.Fatalf("Inspect = %+v, %v", st, err)
		}
		a := st[0]
		if !a.Exists || a.Available != 5 || a.Held != 2 || a.Sold != 3 || a.PerUserLimit != 5 ||
			a.HoldTTL != time.Minute || a.Fence.Epoch != 1 || len(a.Fence.Gen) != 32 || a.Version < 3 {
			t.Fatalf("Inspect(a) = %+v", a)
		}
		if st[1].Exists || st[1].SKU != "nope" {
			t.Fatalf("Inspect(nope) = %+v", st[1])
		}
		if _, err := fx.s.Inspect(fx.ctx(), []string{"a", "b{"}); !errors.Is(err, stock.ErrInvalid) {
			t.Fatalf("Inspect of a bad SKU: %v", err)
		}

		hs, err := fx.s.HeldOrders(fx.ctx(), "a")
		want := redisstock.Hold{OrderID: "o1", UserID: "u1", SKU: "a", Qty: 2, Deadline: fx.clock.Now().Add(time.Minute)}
		if err != nil || len(hs) != 1 || hs[0].OrderID != want.OrderID || hs[0].UserID != want.UserID ||
			hs[0].Qty != want.Qty || !hs[0].Deadline.Equal(want.Deadline) {
			t.Fatalf("HeldOrders = %+v, %v; want [%+v]", hs, err, want)
		}

		// Deducts do not move the epoch: a correction still applies.
		is(t, fx.s.Deduct(fx.ctx(), ord("o3", "u3", it("a", 1))), nil, "Deduct")
		applied, err := fx.s.Adjust(fx.ctx(), "a", a.Fence, -2)
		if err != nil || !applied {
			t.Fatalf("Adjust = %v, %v; want applied", applied, err)
		}
		fx.want("a", 2, 3, 3)
		// The same correction again is stale: it changes nothing.
		applied, err = fx.s.Adjust(fx.ctx(), "a", a.Fence, -2)
		if err != nil || applied {
			t.Fatalf("stale Adjust = %v, %v; want not applied", applied, err)
		}
		fx.want("a", 2, 3, 3)
		_, err = fx.s.Adjust(fx.ctx(), "a", redisstock.Fence{Gen: a.Fence.Gen, Epoch: a.Fence.Epoch + 1}, -3)
		is(t, err, stock.ErrInvalid, "Adjust below 0")
		_, err = fx.s.Adjust(fx.ctx(), "nope", redisstock.Fence{}, 1)
		is(t, err, stock.ErrUnknownSKU, "Adjust of unknown SKU")
		fx.want("a", 2, 3, 3)
	})
}

func TestMaxUnitsExact(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", stock.MaxUnits-1, 0, 0)
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "op-9", SKU: "a", Units: 1}), nil, "Restock to MaxUnits")
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "op-10", SKU: "a", Units: 1}), stock.ErrInvalid, "Restock past MaxUnits")
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "", it("a", stock.MaxQty))), nil, "Deduct")
		fx.want("a", stock.MaxUnits-stock.MaxQty, stock.MaxQty, 0)
	})
}
