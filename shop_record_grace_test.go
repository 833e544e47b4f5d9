package stockguard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// A negative Flow.RecordGrace is taken by the flow as zero (the grace is
// the hold time: tiered.Config.RecordHold), so it must not be a way around
// the Shop's checks of that grace against the reclaimer's interval: with
// RecordGrace zero, PutOnSale refuses a hold time not longer than the
// interval, and New refuses a negative RecordGrace (stock.ErrInvalid,
// nothing built) rather than accept, as it did, a listing the same Shop
// with RecordGrace zero refuses.
func TestNegativeRecordGraceIsRefused(t *testing.T) {
	l := stock.Listing{SKU: "phone", Units: 5, HoldTTL: 500 * time.Millisecond}
	zero, _, _ := shopOn(t, stockguard.Config{})
	if err := zero.PutOnSale(t.Context(), l); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("RecordGrace 0, hold 500ms, reclaim every 1s: %v, want ErrInvalid", err)
	}
	var cfg stockguard.Config
	cfg.Flow = tiered.Config{RecordGrace: -time.Nanosecond}
	if g := cfg.Flow.RecordHold(l.HoldTTL); g != (tiered.Config{}).RecordHold(l.HoldTTL) {
		t.Fatalf("the flow does not treat a negative grace as zero: record hold %v", g)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	neg, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, cfg)
	if err == nil {
		t.Cleanup(neg.Close)
		if err := neg.CreateTables(t.Context()); err != nil {
			t.Fatal(err)
		}
		err = neg.PutOnSale(t.Context(), l)
		t.Errorf("New with RecordGrace -1ns (the flow's zero) built a Shop; PutOnSale of hold 500ms, reclaim every 1s: %v", err)
		return
	}
	if !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("New with RecordGrace -1ns: %v, want ErrInvalid", err)
	}
	if keys := mr.Keys(); len(keys) > 0 {
		t.Errorf("a refused New wrote to Redis: %v", keys)
	}
}
