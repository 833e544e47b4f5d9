package observe_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want observe.Outcome
	}{
		{nil, observe.OK},
		{stock.ErrSoldOut, observe.SoldOut},
		{fmt.Errorf("x: %w", stock.ErrLimitReached), observe.LimitReached},
		{stock.ErrUnknownSKU, observe.UnknownSKU},
		{stock.ErrUnknownOrder, observe.UnknownOrder},
		{stock.ErrConflict, observe.Conflict},
		{stock.ErrHoldExpired, observe.Expired},
		{stock.ErrOrderClosed, observe.Closed},
		{&stock.InvalidError{Field: "f", Reason: "r"}, observe.Invalid},
		{stock.ErrContention, observe.Contention},
		{stock.ErrUnavailable, observe.Unavailable},
		{context.Canceled, observe.Canceled},
		{context.DeadlineExceeded, observe.Canceled},
		// An unknown outcome wins over what it wraps: the call may have applied.
		{fmt.Errorf("%w: %w", stock.ErrUnknownOutcome, context.DeadlineExceeded), observe.UnknownOutcome},
		{errors.New("connection refused"), observe.Failed},
	} {
		if got := observe.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if observe.SoldOut.String() != "sold_out" || observe.Failed.String() != "error" || observe.Outcome(200).String() != "error" {
		t.Error("outcome names")
	}
	if !observe.Conflict.Business() || observe.OK.Business() || observe.UnknownOutcome.Business() {
		t.Error("Business")
	}
}

type testKey struct{}

func TestZeroObserverReportsNothingAndKeepsTheContext(t *testing.T) {
	var o observe.Observer
	ctx := context.WithValue(context.Background(), testKey{}, 1)
	got, tr := o.Track(ctx, "x", observe.OpDeduct, 1)
	if got != ctx || tr != (observe.Tracker{}) {
		t.Fatal("the zero Observer changed the context or started a call")
	}
	tr.Done(nil) // must not panic
	var nilObs *observe.Observer
	if _, tr := nilObs.Track(ctx, "x", observe.OpDeduct, 1); tr != (observe.Tracker{}) {
		t.Fatal("a nil Observer started a call")
	}
}

// call is the part of an Ended a scripted sequence can predict.
type call struct {
	component string
	op        observe.Op
	items     int
	outcome   observe.Outcome
	depth     int
}

func calls(r *observe.Recorder) []call {
	var out []call
	for _, e := range r.Calls() {
		if e.Duration < 0 || e.Start.IsZero() {
			panic("a call without a start or with a negative duration")
		}
		out = append(out, call{e.Component, e.Op, e.Items, e.Outcome, e.Depth})
	}
	return out
}

func order(id, sku string, qty int64) stock.Order {
	return stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: sku, Qty: qty}}}
}

func TestMemstockReportsEveryCallAndItsReclaimLag(t *testing.T) {
	var rec observe.Recorder
	clock := stocktest.NewClock(stocktest.Epoch)
	m := memstock.New(clock, memstock.WithObserver(rec.Observer()))
	ctx := context.Background()
	_ = m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5, HoldTTL: time.Minute})
	_ = m.Deduct(ctx, order("o1", "a", 2))
	_ = m.Deduct(ctx, order("o2", "a", 9))
	_ = m.Deduct(ctx, stock.Order{ID: "o3", Items: []stock.Item{{SKU: "a", Qty: 1}, {SKU: "nope", Qty: 1}}})
	_ = m.Confirm(ctx, "o1")
	_ = m.Revert(ctx, "o1")
	_ = m.Revert(ctx, "ghost")
	_ = m.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 1})
	_ = m.Deduct(ctx, order("o4", "a", 1))
	_ = m.Deduct(ctx, order("o5", "a", 2))
	want := []call{
		{"memstock", observe.OpPutOnSale, 1, observe.OK, 0},
		{"memstock", observe.OpDeduct, 1, observe.OK, 0},
		{"memstock", observe.OpDeduct, 1, observe.SoldOut, 0},
		{"memstock", observe.OpDeduct, 2, observe.UnknownSKU, 0},
		{"memstock", observe.OpConfirm, 0, observe.OK, 0},
		{"memstock", observe.OpRevert, 0, observe.OK, 0}, // a refund
		{"memstock", observe.OpRevert, 0, observe.UnknownOrder, 0},
		{"memstock", observe.OpRestock, 1, observe.OK, 0},
		{"memstock", observe.OpDeduct, 1, observe.OK, 0},
		{"memstock", observe.OpDeduct, 1, observe.OK, 0},
	}
	if got := calls(&rec); !slices.Equal(got, want) {
		t.Fatalf("calls\n got %v\nwant %v", got, want)
	}
	if r := rec.Reclaims(); len(r) != 0 {
		t.Fatalf("reclaims before any pass: %+v", r)
	}
	clock.Advance(time.Minute + 30*time.Second)
	if _, err := m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReclaimExpired(ctx, 100); err != nil {
		t.Fatal(err)
	}
	r := rec.Reclaims()
	if len(r) != 2 || r[0].Component != "memstock" || r[0].Orders != 2 || r[0].Lines != 2 || r[0].Units != 3 ||
		r[0].Lag != 30*time.Second || r[1].Orders != 0 || r[1].Units != 0 || r[1].Lag != 0 {
		t.Fatalf("reclaims %+v; want 2 orders, 3 units, lag 30s, then an empty pass", r)
	}
}

// redisGate returns a redisstock Store on miniredis reporting to o.
func redisGate(t *testing.T, clock stock.Clock, o observe.Observer) *redisstock.Store {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	g, err := redisstock.New(c, redisstock.Config{Clock: clock, Observer: o})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// sqlRecord returns a sqlstock Store on SQLite reporting to o.
func sqlRecord(t *testing.T, clock stock.Clock, o observe.Observer) *sqlstock.Store {
	s, err := sqlstock.New(testdb.SQLite(t, 4).DB, sqlstock.Config{Dialect: sqlstock.SQLite, Clock: clock, Observer: o})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTieredCallsNestTheirTiersCalls(t *testing.T) {
	var rec observe.Recorder
	o := rec.Observer()
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := redisGate(t, clock, o), sqlRecord(t, clock, o)
	flow := tiered.New(gate, record, tiered.Config{Clock: clock, Observer: o})
	ctx := context.Background()
	if err := flow.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 3}); err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	if err := flow.Deduct(ctx, order("o1", "a", 2)); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{"redisstock", observe.OpDeduct, 1, observe.OK, 1},
		{"sqlstock", observe.OpDeduct, 1, observe.OK, 1},
		{"redisstock", observe.OpDeduct, 1, observe.OK, 1}, // the recheck
		{"tiered", observe.OpDeduct, 1, observe.OK, 0},
	}
	if got := calls(&rec); !slices.Equal(got, want) {
		t.Fatalf("Deduct's calls\n got %v\nwant %v", got, want)
	}
	// Each store sent its lone order as a batch of one.
	b := rec.Batches()
	if len(b) != 3 || b[0].Component != "redisstock" || b[1].Component != "sqlstock" || b[0].Size != 1 || b[1].Size != 1 || b[0].Err != nil {
		t.Fatalf("batches %+v; want redisstock, sqlstock, redisstock, each of one order", b)
	}
	rec.Reset()
	err := flow.Deduct(ctx, order("o2", "a", 2))
	if !errors.Is(err, stock.ErrSoldOut) {
		t.Fatalf("Deduct beyond the stock: %v", err)
	}
	want = []call{
		{"redisstock", observe.OpDeduct, 1, observe.SoldOut, 1},
		{"tiered", observe.OpDeduct, 1, observe.SoldOut, 0},
	}
	if got := calls(&rec); !slices.Equal(got, want) {
		t.Fatalf("refused Deduct's calls\n got %v\nwant %v", got, want)
	}
	rec.Reset()
	if err := flow.Confirm(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	want = []call{
		{"redisstock", observe.OpConfirm, 0, observe.OK, 1},
		{"sqlstock", observe.OpConfirm, 0, observe.OK, 1},
		{"tiered", observe.OpConfirm, 0, observe.OK, 0},
	}
	if got := calls(&rec); !slices.Equal(got, want) {
		t.Fatalf("Confirm's calls\n got %v\nwant %v", got, want)
	}
}

func TestBatchesCountEveryConcurrentDeductOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, clock stock.Clock, o observe.Observer) stock.Manager
	}{
		{"redisstock", func(t *testing.T, c stock.Clock, o observe.Observer) stock.Manager { return redisGate(t, c, o) }},
		{"sqlstock", func(t *testing.T, c stock.Clock, o observe.Observer) stock.Manager { return sqlRecord(t, c, o) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec observe.Recorder
			m := tc.store(t, stocktest.NewClock(stocktest.Epoch), rec.Observer())
			ctx := context.Background()
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: 1000}); err != nil {
				t.Fatal(err)
			}
			const n = 200
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := m.Deduct(ctx, order(fmt.Sprint("o", i), "hot", 1)); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			sum, most := 0, 0
			for _, b := range rec.Batches() {
				if b.Component != tc.name || b.Op != observe.OpDeduct || b.Size < 1 || b.Wait < 0 || b.Duration < 0 || b.Err != nil {
					t.Fatalf("batch %+v", b)
				}
				sum += b.Size
				most = max(most, b.Size)
			}
			if sum != n {
				t.Fatalf("batches carried %d orders, want %d", sum, n)
			}
			deducts := 0
			for _, c := range rec.Calls() {
				if c.Op == observe.OpDeduct && c.Outcome == observe.OK {
					deducts++
				}
			}
			if deducts != n {
				t.Fatalf("%d deduct calls reported, want %d", deducts, n)
			}
			t.Logf("%d orders in %d batches, the largest of %d", n, len(rec.Batches()), most)
		})
	}
}

func TestStoresReportReclaimPassesWithTheirLag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, clock stock.Clock, o observe.Observer) interface {
			stock.Manager
			stock.Reclaimer
		}
	}{
		{"redisstock", func(t *testing.T, c stock.Clock, o observe.Observer) interface {
			stock.Manager
			stock.Reclaimer
		} {
			return redisGate(t, c, o)
		}},
		{"sqlstock", func(t *testing.T, c stock.Clock, o observe.Observer) interface {
			stock.Manager
			stock.Reclaimer
		} {
			return sqlRecord(t, c, o)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec observe.Recorder
			clock := stocktest.NewClock(stocktest.Epoch)
			m := tc.store(t, clock, rec.Observer())
			ctx := context.Background()
			if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
			_ = m.Deduct(ctx, order("early", "a", 2))
			clock.Advance(5 * time.Second)
			_ = m.Deduct(ctx, order("late", "a", 3))
			clock.Advance(20 * time.Second) // early is 15s past its deadline, late 10s
			got, err := m.ReclaimExpired(ctx, 100)
			if err != nil || len(got) != 2 {
				t.Fatalf("ReclaimExpired: %v, %v", got, err)
			}
			r := rec.Reclaims()
			if len(r) != 1 || r[0].Component != tc.name || r[0].Orders != 2 || r[0].Lines != 2 || r[0].Units != 5 || r[0].Lag != 15*time.Second {
				t.Fatalf("reclaims %+v; want one pass of 2 orders, 5 units, lag 15s", r)
			}
		})
	}
}

func TestDegradeReportsBreakerChanges(t *testing.T) {
	var rec observe.Recorder
	clock := stocktest.NewClock(stocktest.Epoch)
	primary := stocktest.NewFaulty(memstock.New(clock))
	fallback := memstock.New(clock)
	d, err := degrade.New(primary, fallback, degrade.Config{Clock: clock, FallbackLimit: rate.Inf, Observer: rec.Observer(),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 2 }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	for _, m := range []stock.Manager{primary.Manager, fallback} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	primary.SetFault(stocktest.Down)
	for i := range 3 {
		_ = d.Deduct(ctx, order(fmt.Sprint("o", i), "a", 1))
	}
	b := rec.Breakers()
	if len(b) < 2 || b[0] != (observe.Breaker{To: "primary", Share: 1}) || b[1].From != "primary" || b[1].To != "degraded" || b[1].Share != 0 {
		t.Fatalf("breaker events %+v; want the breaker as made (primary), then primary -> degraded", b)
	}
	var outcomes []observe.Outcome
	for _, c := range rec.Calls() {
		if c.Component == "degrade" {
			outcomes = append(outcomes, c.Outcome)
		}
	}
	// Two failures at the primary (refused dials: nothing was applied),
	// then the fallback takes the third order.
	want := []observe.Outcome{observe.Failed, observe.Failed, observe.OK}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("degrade outcomes %v, want %v", outcomes, want)
	}
}

func TestReconcileReportsFindings(t *testing.T) {
	var rec observe.Recorder
	clock := stocktest.NewClock(stocktest.Epoch)
	gate, record := redisGate(t, clock, observe.Observer{}), sqlRecord(t, clock, observe.Observer{})
	ctx := context.Background()
	for _, m := range []stock.Manager{gate, record} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := gate.Deduct(ctx, order("lost", "a", 4)); err != nil { // never recorded, then returned
		t.Fatal(err)
	}
	if err := gate.Confirm(ctx, "lost"); err != nil { // the gate sold 4 the record never saw
		t.Fatal(err)
	}
	r, err := reconcile.New(gate, record, reconcile.Config{DryRun: true, Observer: rec.Observer(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Repair(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	c := rec.Corrections()
	if len(c) != 1 || c[0].SKU != "a" || c[0].Action != "dry-run" || c[0].Delta != 4 || c[0].Err != nil {
		t.Fatalf("corrections %+v; want one dry run of +4 on a", c)
	}
}

func TestLimitersReportDecisions(t *testing.T) {
	var rec observe.Recorder
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Burst: 1}, Observer: rec.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = l.Allow(ctx, "k")
	_, _ = l.Allow(ctx, "k")
	_, _ = l.AllowN(ctx, "", 1)
	got := rec.Limits()
	if len(got) != 3 || !got[0].Allowed || got[1].Allowed || got[1].Err != nil || got[2].Err == nil || got[0].Limiter != "local" || got[0].N != 1 {
		t.Fatalf("limit events %+v; want allowed, refused, invalid", got)
	}
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	r, err := limiter.NewRedis(c, limiter.RedisConfig{Limit: limiter.Limit{Rate: 1, Burst: 2}, Observer: rec.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	_, _ = r.AllowN(ctx, "k", 2)
	_, _ = r.Allow(ctx, "k")
	got = rec.Limits()
	if len(got) != 2 || !got[0].Allowed || got[0].N != 2 || got[1].Allowed || got[0].Limiter != "redis" {
		t.Fatalf("redis limit events %+v", got)
	}
	co, err := limiter.NewComposite(c, limiter.CompositeConfig{Observer: rec.Observer(), Dimensions: []limiter.Dimension{
		{Name: "user", Limit: limiter.Limit{Rate: 1, Burst: 1}}, {Name: "sku", Limit: limiter.Limit{Rate: 1, Burst: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec.Reset()
	req := limiter.Request{Values: []string{"u1", "phone"}, Tag: "u1"}
	_, _ = co.Allow(ctx, req)
	_, _ = co.Allow(ctx, req)
	got = rec.Limits()
	if len(got) != 2 || !got[0].Allowed || got[1].Allowed || got[1].Err != nil || got[0].Limiter != "composite" || got[1].N != 1 {
		t.Fatalf("composite limit events %+v; want allowed, then refused by the user dimension", got)
	}
}

// A call made in the context of a tracked call is nested; the
// application's calls are not, whichever hooks the outer call's Observer
// sets.
func TestTrackMarksNestedCalls(t *testing.T) {
	var mu sync.Mutex
	nested := map[string]bool{}
	inner := observe.Observer{End: func(_ context.Context, c observe.Call, _ observe.Result) {
		mu.Lock()
		nested[c.Component] = c.Nested
		mu.Unlock()
	}}
	for _, outer := range []observe.Observer{inner, {Begin: func(ctx context.Context, _ observe.Call) context.Context { return ctx }}} {
		ctx, top := outer.Track(context.Background(), "degrade", observe.OpDeduct, 1)
		mid, flow := inner.Track(ctx, "tiered", observe.OpDeduct, 1)
		_, gate := inner.Track(mid, "redisstock", observe.OpDeduct, 1)
		gate.Done(nil)
		flow.Done(nil)
		top.Done(nil)
		_, alone := inner.Track(context.Background(), "sqlstock", observe.OpConfirm, 0)
		alone.Done(nil)
		want := map[string]bool{"tiered": true, "redisstock": true, "sqlstock": false}
		if outer.End != nil {
			want["degrade"] = false
		}
		if !maps.Equal(nested, want) {
			t.Errorf("Nested = %v, want %v", nested, want)
		}
		clear(nested)
	}
}

// Each breaker is reported as it is made, before any change: the shared
// one by degrade.New, a per-SKU one when its SKU is first seen (once).
func TestDegradeReportsBreakersAsMade(t *testing.T) {
	var rec observe.Recorder
	clock := stocktest.NewClock(stocktest.Epoch)
	primary, fallback := memstock.New(clock), memstock.New(clock)
	d, err := degrade.New(primary, fallback, degrade.Config{Clock: clock, PerSKU: 8, Observer: rec.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b := rec.Breakers(); !slices.Equal(b, []observe.Breaker{{Name: "", To: "primary", Share: 1}}) {
		t.Fatalf("after New: breaker events %+v; want the shared breaker, primary", b)
	}
	ctx := context.Background()
	for _, m := range []stock.Manager{primary, fallback} {
		if err := m.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := d.Deduct(ctx, order(fmt.Sprint("o", i), "a", 1)); err != nil {
			t.Fatal(err)
		}
	}
	want := []observe.Breaker{{Name: "", To: "primary", Share: 1}, {Name: "a", To: "primary", Share: 1}}
	if b := rec.Breakers(); !slices.Equal(b, want) {
		t.Fatalf("after two Deducts of a: breaker events %+v; want %+v", b, want)
	}
}
