package stockguard_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// handoffShop builds a Shop on a miniredis and SQLite whose hand-off is a
// Redis stream on that miniredis.
func handoffShop(t *testing.T, cfg stockguard.Config) (*stockguard.Shop, *redisstream.Queue) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{mr.Addr()}}))
	t.Cleanup(func() { rdb.Close() })
	q, err := redisstream.New(t.Context(), rdb, redisstream.Config{Stream: "orders", Redelivery: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Handoff = q
	shop, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	if err := shop.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	return shop, q
}

// Orders placed through a Shop with a Handoff are answered by the gate,
// published to the broker and recorded once each by the Shop's consumers.
func TestShopHandoffRecordsEachOrderOnce(t *testing.T) {
	shop, q := handoffShop(t, stockguard.Config{})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 20, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[string][]error{}
	var cs []*handoff.Consumer
	for i := range 2 {
		c, err := shop.Consumer(q.Source(fmt.Sprint("c", i)), handoff.ConsumerConfig{Batch: 8,
			Done: func(_ context.Context, m handoff.Message, err error) {
				mu.Lock()
				done[m.Order.ID] = append(done[m.Order.ID], err)
				mu.Unlock()
			}})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()

	const buyers = 25 // 20 units: 5 refused
	var placed sync.Map
	var buy sync.WaitGroup
	for i := range buyers {
		buy.Go(func() {
			id := fmt.Sprint("o", i)
			switch err := shop.Deduct(ctx, order(id, 1)); {
			case err == nil:
				placed.Store(id, true)
			case errors.Is(err, stock.ErrSoldOut):
			default:
				t.Errorf("Deduct %s: %v", id, err)
			}
		})
	}
	buy.Wait()
	var ids []string
	placed.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	if len(ids) != 20 {
		t.Fatalf("%d orders placed, want 20", len(ids))
	}
	// Bound: 20 orders through miniredis and SQLite; 30s is far above
	// what a loaded machine takes.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := q.Len(ctx)
		mu.Lock()
		ended := len(done)
		mu.Unlock()
		if err == nil && n == 0 && ended == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d messages left, %d of %d orders ended", n, ended, len(ids))
		}
	}
	stop()
	wg.Wait()
	// Done may report an order again (a message handed off twice, or
	// delivered again after a lost Ack), with the same outcome: count by
	// order ID. That the record has each order once is checked below.
	for _, id := range ids {
		errs := done[id]
		if len(errs) == 0 || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
			t.Errorf("order %s ended %v, want each report nil", id, errs)
		}
	}
	if lv, err := shop.Record().Levels(ctx, "phone"); err != nil || lv.Held != 20 || lv.Available != 0 {
		t.Fatalf("record: %+v, %v; want 20 held", lv, err)
	}
	got, err := shop.Record().Orders(ctx, ids)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("record's orders: %d, %v; want %d", len(got), err, len(ids))
	}
	if lv := levels(t, shop.Gate()); lv.Held != 20 || lv.Available != 0 {
		t.Fatalf("gate: %+v, want 20 held", lv)
	}
}

// The settings of a hand-off that the Shop derives, or that disagree with
// another, are refused, naming them.
func TestShopHandoffRefusesSettingsThatDisagree(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	db := testdb.SQLite(t, 1).DB
	q, err := redisstream.New(t.Context(), rdb, redisstream.Config{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	clock := stocktest.NewClock(stocktest.Epoch)
	for field, cfg := range map[string]stockguard.Config{
		"Flow.Recorder":         {Handoff: q, Flow: tiered.Config{Recorder: handoff.NewRecorder(q, nil, handoff.RecorderConfig{})}},
		"HandoffRecorder.Clock": {Handoff: q, HandoffRecorder: handoff.RecorderConfig{Clock: clock}},
		"HandoffRecorder.Lag":   {Handoff: q, HandoffRecorder: handoff.RecorderConfig{Lag: func() time.Duration { return 0 }}},
		"HandoffRecorder":       {HandoffRecorder: handoff.RecorderConfig{MaxLag: time.Second}},
	} {
		_, err := stockguard.New(rdb, db, cfg)
		if !errors.Is(err, stock.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want ErrInvalid naming it", field, err)
		}
	}

	shop, err := stockguard.New(rdb, db, stockguard.Config{Handoff: q, Record: sqlstock.Config{MaxGroup: 16}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	for name, cfg := range map[string]handoff.ConsumerConfig{
		"Batch":    {Batch: 17},
		"Clock":    {Clock: clock},
		"Observer": {Observer: observe.Observer{Handoff: func(context.Context, observe.Handoff) {}}},
	} {
		if _, err := shop.Consumer(q.Source("c"), cfg); !errors.Is(err, stock.ErrInvalid) || !strings.Contains(err.Error(), name) {
			t.Errorf("Consumer with %s: %v, want ErrInvalid naming it", name, err)
		}
	}
	if _, err := shop.Consumer(nil, handoff.ConsumerConfig{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("Consumer of a nil Source: %v, want ErrInvalid", err)
	}
	if _, err := shop.Consumer(q.Source("c"), handoff.ConsumerConfig{Batch: 16}); err != nil {
		t.Errorf("Consumer with the record's group: %v", err)
	}
}

// The Shop's backpressure reads the broker's lag: orders waiting in the
// queue with no consumer running on this node (they may run on others)
// turn new orders away once the oldest waited more than half the hold
// time, and the queue drained (as this node's consumer sees it too)
// reopens admissions.
func TestShopHandoffBacklogIsTheBrokers(t *testing.T) {
	clock := stocktest.NewClock(stocktest.Epoch)
	shop, q := handoffShop(t, stockguard.Config{Clock: clock})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 20, HoldTTL: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5*time.Minute + time.Second)
	err := shop.Deduct(ctx, order("o2", 1))
	if !errors.Is(err, tiered.ErrNotAdmitted) || !errors.Is(err, handoff.ErrBacklog) {
		t.Fatalf("Deduct with o1 waiting 5m1s of a 10m hold: %v, want ErrNotAdmitted (ErrBacklog)", err)
	}
	if lv := levels(t, shop.Gate()); lv.Held != 1 {
		t.Fatalf("gate holds %d after the refusal, want o1's 1", lv.Held)
	}
	c, err := shop.Consumer(q.Source("c"), handoff.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ds, err := q.Source("c").Fetch(fctx, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch = %d, %v", len(ds), err)
	}
	c.Settle(ctx, ds)
	c.Settle(ctx, nil)         // as Run's next Fetch, which finds the queue empty
	clock.Advance(time.Second) // past the Recorder's LagCache
	if err := shop.Deduct(ctx, order("o2", 1)); err != nil {
		t.Fatalf("Deduct with the queue drained: %v", err)
	}
}
