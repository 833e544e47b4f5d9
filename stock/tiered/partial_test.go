package tiered_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// ext is a Faulty that also forwards stock.PartialReverter and
// stock.HoldExtender, with a fault of its own for those two methods
// (stocktest.Faulty forwards neither).
type ext struct {
	*stocktest.Faulty
	mu    sync.Mutex
	fault map[string]stocktest.Fault // by method: "RevertItems", "ExtendHold"
	calls map[string]int
}

func newExt(m stock.Manager) *ext {
	return &ext{Faulty: stocktest.NewFaulty(m), fault: map[string]stocktest.Fault{}, calls: map[string]int{}}
}

func (e *ext) set(method string, x stocktest.Fault) {
	e.mu.Lock()
	e.fault[method] = x
	e.mu.Unlock()
}

func (e *ext) count(method string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[method]
}

func (e *ext) do(method string, run func() error) error {
	e.mu.Lock()
	e.calls[method]++
	x := e.fault[method]
	e.mu.Unlock()
	switch x {
	case stocktest.Down:
		return &net.OpError{Op: "dial", Net: "tcp", Err: stocktest.ErrInjected}
	case stocktest.LostReply:
		_ = run()
		return &net.OpError{Op: "read", Net: "tcp", Err: stocktest.ErrInjected}
	}
	return run()
}

func (e *ext) RevertItems(ctx context.Context, r stock.Return) error {
	return e.do("RevertItems", func() error { return e.Manager.(stock.PartialReverter).RevertItems(ctx, r) })
}

func (e *ext) ExtendHold(ctx context.Context, id string, deadline time.Time) error {
	return e.do("ExtendHold", func() error { return e.Manager.(stock.HoldExtender).ExtendHold(ctx, id, deadline) })
}

type extFixture struct {
	*fixture
	xgate, xrecord *ext
}

// newExtFixture is newFixture over ext tiers, with Config.RecordGrace grace.
func newExtFixture(t *testing.T, grace time.Duration) *extFixture {
	f := &fixture{t: t, clock: stocktest.NewClock(stocktest.Epoch)}
	x := &extFixture{fixture: f, xgate: newExt(memstock.New(f.clock)), xrecord: newExt(memstock.New(f.clock))}
	f.gate, f.record = x.xgate.Faulty, x.xrecord.Faulty
	f.m = tiered.New(x.xgate, x.xrecord, tiered.Config{Clock: f.clock, RecordGrace: grace,
		OnDrift: func(d tiered.Drift) { f.drift = append(f.drift, d) }})
	return x
}

func (x *extFixture) order(tier stock.Manager, id string) stock.OrderInfo {
	x.t.Helper()
	if ft, ok := tier.(*stocktest.Faulty); ok {
		tier = ft.Manager
	}
	got, err := tier.(stock.OrderReader).Orders(x.t.Context(), []string{id})
	if err != nil {
		x.t.Fatal(err)
	}
	return got[0]
}

func (x *extFixture) units(tier stock.Manager, name string, want int64) {
	x.t.Helper()
	if ft, ok := tier.(*stocktest.Faulty); ok {
		tier = ft.Manager
	}
	n, err := tier.(stock.OrderReader).UserUnits(x.t.Context(), "a", "u1")
	if err != nil || n != want {
		x.t.Fatalf("%s: UserUnits = %d, %v; want %d", name, n, err, want)
	}
}

// A record that fails after the gate gave part of an order back leaves the
// call half-way (a *TierError); the retry with the same Return finishes it
// at the record and gives nothing back twice at either tier, whether the
// failed call reached the record or not.
func TestRevertItemsRetryAfterTheRecordFailedGivesBackOnce(t *testing.T) {
	for _, fault := range []stocktest.Fault{stocktest.Down, stocktest.LostReply} {
		x := newExtFixture(t, 0)
		ctx := t.Context()
		if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
		if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
			t.Fatal(err)
		}
		r := stock.Return{OpID: "refund-1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
		x.xrecord.set("RevertItems", fault)
		err := x.m.RevertItems(ctx, r)
		var te *tiered.TierError
		if !errors.As(err, &te) || te.Tier != tiered.Record || !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("%v: RevertItems with the record failing = %v, want a record *TierError", fault, err)
		}
		x.want(x.gate, "gate", "a", 7, 3, 0)
		x.xrecord.set("RevertItems", stocktest.Healthy)
		for i := range 2 {
			if err := x.m.RevertItems(ctx, r); err != nil {
				t.Fatalf("%v: retry %d: %v", fault, i+1, err)
			}
			x.want(x.gate, "gate", "a", 7, 3, 0)
			x.want(x.record, "record", "a", 7, 3, 0)
		}
		x.units(x.gate, "gate", 3)
		x.units(x.record, "record", 3)
		if got := x.xgate.count("RevertItems"); got != 3 {
			t.Fatalf("%v: gate RevertItems calls = %d, want 3", fault, got)
		}
		got, err := x.m.Orders(ctx, []string{"o1"})
		if err != nil || !slices.Equal(got[0].Returned, []stock.Item{{SKU: "a", Qty: 1}}) || got[0].State != stock.StateHeld {
			t.Fatalf("%v: Orders = %+v, %v; want held with 1 returned", fault, got, err)
		}
		if err := x.m.Confirm(ctx, "o1"); err != nil {
			t.Fatal(err)
		}
		x.want(x.gate, "gate", "a", 7, 0, 3)
		x.want(x.record, "record", "a", 7, 0, 3)
		// A refund of the rest closes the order at both tiers.
		if err := x.m.RevertItems(ctx, stock.Return{OpID: "refund-2", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}); err != nil {
			t.Fatal(err)
		}
		x.want(x.gate, "gate", "a", 10, 0, 0)
		x.want(x.record, "record", "a", 10, 0, 0)
		if in := x.order(x.record, "o1"); in.State != stock.StateRefunded {
			t.Fatalf("%v: record state %v, want refunded", fault, in.State)
		}
		if len(x.drift) != 0 {
			t.Fatalf("%v: drift %+v", fault, x.drift)
		}
	}
}

// The gate's refusals are the answer and nothing is written; an order the
// record does not have (pending with a Recorder) is unknown.
func TestRevertItemsRefusals(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 2)); err != nil {
		t.Fatal(err)
	}
	err := x.m.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}})
	var se *stock.SKUError
	if !errors.Is(err, stock.ErrExceedsOrder) || !errors.As(err, &se) || se.SKU != "a" {
		t.Fatalf("RevertItems past the order = %v, want ErrExceedsOrder on a", err)
	}
	if err := x.m.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "nope", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, stock.ErrUnknownOrder) {
		t.Fatalf("RevertItems of an unknown order = %v", err)
	}
	if x.xrecord.count("RevertItems") != 0 || x.xgate.count("RevertItems") != 1 {
		t.Fatalf("calls gate/record = %d/%d, want 1/0", x.xgate.count("RevertItems"), x.xrecord.count("RevertItems"))
	}
	x.want(x.gate, "gate", "a", 8, 2, 0)
	x.want(x.record, "record", "a", 8, 2, 0)
}

// An order the gate does not know (a fallback took it at the record while
// the gate was down) is returned at the record alone.
func TestRevertItemsOfARecordOnlyOrder(t *testing.T) {
	x := newExtFixture(t, 0)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := x.record.Deduct(ctx, ord("o1", 3)); err != nil { // the fallback's
		t.Fatal(err)
	}
	r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	if err := x.m.RevertItems(ctx, r); err != nil {
		t.Fatal(err)
	}
	x.want(x.record, "record", "a", 9, 1, 0)
	x.want(x.gate, "gate", "a", 10, 0, 0)
	x.clock.Advance(time.Minute) // the order's gate deadline
	if err := x.m.RevertItems(ctx, stock.Return{OpID: "r2", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}); !errors.Is(err, stock.ErrHoldExpired) {
		t.Fatalf("RevertItems past the gate deadline = %v, want ErrHoldExpired", err)
	}
	x.want(x.record, "record", "a", 9, 1, 0)
}

// A return the gate applies while it holds the order, whose record step
// comes only after the record's copy passed its deadline (a retry after the
// record failed, or a call stalled between the tiers), returns the copy at
// the record then, as its reclaimer would: the gate never sells units the
// record still counts as held.
func TestRevertItemsPastTheRecordDeadlineReturnsTheCopy(t *testing.T) {
	x := newExtFixture(t, time.Second)
	ctx := t.Context()
	if err := x.m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := x.m.Deduct(ctx, ord("o1", 4)); err != nil {
		t.Fatal(err)
	}
	r := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	x.xrecord.set("RevertItems", stocktest.Down)
	var te *tiered.TierError
	if err := x.m.RevertItems(ctx, r); !errors.As(err, &te) || te.Tier != tiered.Record {
		t.Fatalf("RevertItems with the record down = %v, want a record *TierError", err)
	}
	x.xrecord.set("RevertItems", stocktest.Healthy)
	x.clock.Advance(time.Minute + time.Second) // past the record's deadline
	for i := range 2 {
		if err := x.m.RevertItems(ctx, r); err != nil {
			t.Fatalf("retry %d: %v", i+1, err)
		}
		x.want(x.gate, "gate", "a", 7, 3, 0)
		x.want(x.record, "record", "a", 10, 0, 0)
	}
	if in := x.order(x.record, "o1"); in.State != stock.StateExpired {
		t.Fatalf("record state %v, want expired", in.State)
	}
	x.units(x.record, "record", 0)
	if len(x.drift) != 2 || !errors.Is(x.drift[0].Err, stock.ErrHoldExpired) {
		t.Fatalf("drift %+v, want the record's ErrHoldExpired twice", x.drift)
	}
	// The gate's reclaimer returns the rest; the record has nothing more.
	if _, err := x.m.ReclaimExpired(ctx, 10); err != nil {
		t.Fatal(err)
	}
	x.want(x.gate, "gate", "a", 10, 0, 0)
	x.want(x.record, "record", "a", 10, 0, 0)
}
