package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// The package doc: "Begin and End bracket each call of a Manager method
// (Deduct, Confirm, Revert, Restock, PutOnSale, ReclaimExpired)", and
// OpReclaim exists for it; no store ever reports a ReclaimExpired call.
func TestReclaimExpiredIsReportedAsACall(t *testing.T) {
	ctx := context.Background()
	clock := stocktest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	for _, name := range []string{"memstock", "redisstock", "sqlstock"} {
		t.Run(name, func(t *testing.T) {
			var rec observe.Recorder
			var m interface {
				stock.Manager
				stock.Reclaimer
			}
			switch name {
			case "memstock":
				m = memstock.New(clock, memstock.WithObserver(rec.Observer()))
			case "redisstock":
				s, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("rv"), Observer: rec.Observer()})
				if err != nil {
					t.Fatal(err)
				}
				m = s
			case "sqlstock":
				s, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Clock: clock, Observer: rec.Observer()})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CreateTables(ctx); err != nil {
					t.Fatal(err)
				}
				m = s
			}
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := m.Deduct(ctx, stock.Order{ID: "o", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Minute)
			got, err := m.ReclaimExpired(ctx, 10)
			if err != nil || len(got) != 1 {
				t.Fatalf("ReclaimExpired = %v, %v", got, err)
			}
			var ops []observe.Op
			for _, c := range rec.Calls() {
				ops = append(ops, c.Op)
			}
			t.Logf("calls reported: %v; reclaim passes: %+v", ops, rec.Reclaims())
			found := false
			for _, op := range ops {
				found = found || op == observe.OpReclaim
			}
			if !found {
				t.Errorf("%s.ReclaimExpired was not reported through Begin/End (calls: %v)", name, ops)
			}
		})
	}
}

// degrade.ErrBusy (the fallback's rate limit refused; nothing written,
// retry later) is classified as a plain infrastructure failure.
func TestClassifyErrBusyAsContention(t *testing.T) {
	if o := observe.Classify(degrade.ErrBusy); o == observe.Failed {
		t.Errorf("Classify(degrade.ErrBusy) = %v: a load-shedding refusal that wrote nothing is counted as an infrastructure error", o)
	}
}
