package sqlstock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// ReclaimExpired while another transaction holds the stock row (or the
// due ledger lines) answers within Store.AnswerBound, returning nothing of
// what is held (nil, or stock.ErrContention, never an unknown outcome);
// once the holder lets go, the next pass returns the units exactly once.
func TestReclaimBoundedWhileRowsHeld(t *testing.T) {
	for _, b := range backends() {
		if b.dialect == sqlstock.SQLite {
			continue
		}
		for _, what := range []string{"stock", "ledger"} {
			t.Run(b.name+"/"+what, func(t *testing.T) {
				b.need(t)
				db := b.open(t)
				ctx := context.Background()
				clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, LockWait: time.Second, Clock: clock})
				if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{"o1", "o2", "o3"} {
					if err := s.Deduct(ctx, stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}); err != nil {
						t.Fatal(err)
					}
				}
				clock.Advance(2 * time.Minute)
				tables := s.Tables()
				w, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = w.Rollback() }()
				q := "UPDATE " + quote(b.dialect, tables[0]) + " SET available = available WHERE sku = ?"
				if what == "ledger" {
					q = "UPDATE " + quote(b.dialect, tables[1]) + " SET qty = qty WHERE order_id = ?"
				}
				if b.dialect == sqlstock.Postgres {
					q = strings.Replace(q, "?", "$1", 1)
				}
				arg := "a"
				if what == "ledger" {
					arg = "o2"
				}
				if _, err := w.ExecContext(ctx, q, arg); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				out, err := s.ReclaimExpired(ctx, 100)
				took := time.Since(start)
				t.Logf("ReclaimExpired: %d reclaimed, %v, after %v", len(out), err, took.Round(time.Millisecond))
				if took > s.AnswerBound()+300*time.Millisecond {
					t.Errorf("ReclaimExpired answered after %v, past AnswerBound %v", took.Round(time.Millisecond), s.AnswerBound())
				}
				if err != nil && (!errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome)) {
					t.Errorf("ReclaimExpired of held rows: %v; want nil or stock.ErrContention", err)
				}
				_ = w.Rollback()
				total := len(out)
				for range 3 {
					more, err := s.ReclaimExpired(ctx, 100)
					if err != nil {
						t.Fatal(err)
					}
					total += len(more)
				}
				lv, _ := s.Levels(ctx, "a")
				if total != 3 || lv.Available != 10 || lv.Held != 0 {
					t.Errorf("reclaimed %d lines in all; levels %+v; want 3, 10 available", total, lv)
				}
			})
		}
	}
}
