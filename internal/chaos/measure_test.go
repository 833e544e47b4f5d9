package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, chaos.ClassOK},
		{fmt.Errorf("x: %w", stock.ErrSoldOut), chaos.ClassBusiness},
		{fmt.Errorf("x: %w", stock.ErrUnknownOutcome), chaos.ClassUnknown},
		{errors.Join(stock.ErrUnknownOutcome, stock.ErrContention), chaos.ClassMixed},
		{stock.ErrContention, chaos.ClassContention},
		{stock.ErrUnavailable, chaos.ClassUnavailable},
		{&net.OpError{Op: "read", Err: errors.New("reset")}, chaos.ClassPlain},
		{context.DeadlineExceeded, chaos.ClassPlain},
	}
	for _, c := range cases {
		if got := chaos.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// TestMeasureScoresAnswers checks the checker: a history is scored against
// what the tiers hold.
func TestMeasureScoresAnswers(t *testing.T) {
	ctx := context.Background()
	rec := memstock.New(stock.SystemClock)
	gate := memstock.New(stock.SystemClock)
	for _, m := range []*memstock.Store{rec, gate} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	item := []stock.Item{{SKU: "a", Qty: 1}}
	take := func(id string) {
		for _, m := range []*memstock.Store{rec, gate} {
			if err := m.Deduct(ctx, stock.Order{ID: id, UserID: "u", Items: item}); err != nil {
				t.Fatal(err)
			}
			if err := m.Confirm(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	take("applied-plain")   // applied, answered with a plain error: misclassified
	take("applied-retried") // unknown, then a retry that sent nothing: still unknown
	take("applied-ok")      // the control
	begin := func(id string) chaos.Event { return chaos.Event{Op: "deduct", ID: id, User: "u", Items: item} }
	answer := func(id, class string) chaos.Event { return chaos.Event{Op: "deduct", ID: id, Class: class, Err: class} }
	events := []chaos.Event{
		begin("applied-plain"), answer("applied-plain", chaos.ClassPlain),
		begin("applied-retried"), answer("applied-retried", chaos.ClassUnknown),
		{Op: "deduct", ID: "applied-retried"}, answer("applied-retried", chaos.ClassPlain),
		begin("applied-ok"), answer("applied-ok", chaos.ClassOK),
		begin("never-unknown"), answer("never-unknown", chaos.ClassUnknown), // allowed, counted
		begin("never-ok"), answer("never-ok", chaos.ClassOK), // a lost ack
		{Op: "confirm", ID: "applied-ok"}, {Op: "confirm", ID: "applied-ok", Class: chaos.ClassOK},
		{Op: "deduct", ID: "slow", User: "u", Items: item},
		{Op: "deduct", ID: "slow", Class: chaos.ClassBusiness, Ms: 1500, Bound: 1000},
	}
	sale := chaos.SaleConfig{SKUs: []string{"a"}, Units: 10, Limit: 5}
	m, err := chaos.Measure(ctx, events, sale, rec, gate)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempts != 6 || m.ToldYes != 2 || m.Misclassified != 1 || m.UnknownNotApplied != 1 || m.LostAcks != 1 ||
		m.Late != 1 || m.Oversold != 0 || m.Double != 0 || m.Leaked != 0 || m.OverLimit != 0 {
		t.Fatalf("measures: %+v", m)
	}
	// Two more units for user u than the limit allows, in the ledger.
	sale.Limit = 1
	if m, _ = chaos.Measure(ctx, events, sale, rec, gate); m.OverLimit != 2 {
		t.Fatalf("over limit = %d, want 2", m.OverLimit)
	}
	sale.Units = 2 // the record sold 3 of 2
	if m, _ = chaos.Measure(ctx, events, sale, rec, gate); m.Oversold != 1 {
		t.Fatalf("oversold = %d, want 1", m.Oversold)
	}
}

// A repeat Deduct of an order whose hold ended answers stock.ErrHoldExpired:
// the order was taken (an earlier attempt's reply was lost) and its units
// went back, which the answer says. The checker scores it right, and
// still scores another refusal of such an order as misclassified.
func TestMeasureHoldExpiredAnswerOfAnExpiredOrder(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	clock := stock.ClockFunc(func() time.Time { return now })
	rec, gate := memstock.New(clock), memstock.New(clock)
	item := []stock.Item{{SKU: "a", Qty: 1}}
	for _, m := range []*memstock.Store{rec, gate} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"told-expired", "told-sold-out"} {
			if err := m.Deduct(ctx, stock.Order{ID: id, UserID: "u", Items: item}); err != nil {
				t.Fatal(err)
			}
		}
	}
	now = now.Add(2 * time.Minute)
	for _, m := range []*memstock.Store{rec, gate} {
		if _, err := m.ReclaimExpired(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	expired := fmt.Errorf("order %q: %w", "told-expired", stock.ErrHoldExpired).Error()
	soldOut := fmt.Errorf("%w: SKU a", stock.ErrSoldOut).Error()
	events := []chaos.Event{
		{Op: "deduct", ID: "told-expired", User: "u", Items: item},
		{Op: "deduct", ID: "told-expired", Class: chaos.ClassBusiness, Err: expired},
		{Op: "deduct", ID: "told-sold-out", User: "u", Items: item},
		{Op: "deduct", ID: "told-sold-out", Class: chaos.ClassBusiness, Err: soldOut},
	}
	m, err := chaos.Measure(ctx, events, chaos.SaleConfig{SKUs: []string{"a"}, Units: 10}, rec, gate)
	if err != nil {
		t.Fatal(err)
	}
	if m.Misclassified != 1 {
		t.Fatalf("misclassified = %d, want 1 (the sold out of an order that was taken): %+v", m.Misclassified, m)
	}
}
