package sqlstock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// With every connection of the pool taken by the application, every call
// (writes, ReclaimExpired and the reads) answers within Store.AnswerBound,
// however long the caller's context: stock.ErrContention (nothing sent),
// never stock.ErrUnknownOutcome.
func TestPoolExhaustedCallsAnswerWithinAnswerBound(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			db := b.open(t)
			ctx := context.Background()
			clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
			s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: 500 * time.Millisecond, Clock: clock})
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(2)
			for range 2 {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			// Each call gets a context far longer than AnswerBound, so a
			// call that does not bound its wait fails the test instead of
			// hanging it. The calls wait for a connection at once, each
			// timed from its own start.
			calls := map[string]func(ctx context.Context) error{
				"Deduct": func(ctx context.Context) error {
					return s.Deduct(ctx, stock.Order{ID: "n", Items: []stock.Item{{SKU: "a", Qty: 1}}})
				},
				"Confirm":    func(ctx context.Context) error { return s.Confirm(ctx, "o1") },
				"ExtendHold": func(ctx context.Context) error { return s.ExtendHold(ctx, "o1", clock.Now().Add(10*time.Minute)) },
				"Restock":    func(ctx context.Context) error { return s.Restock(ctx, stock.Restock{OpID: "k", SKU: "a", Units: 1}) },
				"Reclaim":    func(ctx context.Context) error { _, err := s.ReclaimExpired(ctx, 10); return err },
				"Levels":     func(ctx context.Context) error { _, err := s.Levels(ctx, "a"); return err },
				"Orders":     func(ctx context.Context) error { _, err := s.Orders(ctx, []string{"o1"}); return err },
			}
			var wg sync.WaitGroup
			for name, f := range calls {
				wg.Go(func() {
					cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
					defer cancel()
					start := time.Now()
					err := f(cctx)
					took := time.Since(start)
					t.Logf("%s: %v after %v", name, err, took.Round(time.Millisecond))
					if took > s.AnswerBound()+300*time.Millisecond {
						t.Errorf("%s answered after %v, past AnswerBound %v", name, took.Round(time.Millisecond), s.AnswerBound())
					}
					if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
						t.Errorf("%s with no connection to be had: %v; want stock.ErrContention", name, err)
					}
				})
			}
			wg.Wait()
		})
	}
}
