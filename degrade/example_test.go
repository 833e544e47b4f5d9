package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Redis in front, SQL behind, a breaker around Redis. memstock stands in for
// both stores here; in production the gate is stock/redisstock and the
// record stock/sqlstock, and Recalibrate is a reconcile pass.
func Example() {
	ctx := context.Background()
	clock := stocktest.NewClock(stocktest.Epoch) // a clock the example moves
	redis := &switchable{GateStore: memstock.New(clock)}
	sql := memstock.New(clock)
	events := make(chan degrade.Event, 16)

	flow := tiered.New(redis, sql, tiered.Config{Clock: clock}) // Redis gate, SQL record
	shop, err := degrade.New(flow, nil, degrade.Config{         // nil: the flow's record is the fallback
		FallbackLimit: rate.Limit(1), FallbackBurst: 2, // SQL takes 2 orders now, then 1/s
		Recalibrate: func(ctx context.Context, key string) error {
			return nil // a reconcile pass: repair Redis from SQL
		},
		RampSteps:     []float64{}, // no ramp, to keep the example short
		OnStateChange: func(e degrade.Event) { events <- e },
		Clock:         clock,
	})
	if err != nil {
		panic(err)
	}
	defer shop.Close()

	_ = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100})
	buy := func(id string) error {
		return shop.Deduct(ctx, stock.Order{ID: id, Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}
	fmt.Println("o1:", buy("o1"))

	redis.down = true // Redis fails: five failures open the breaker
	for i := range 5 {
		_ = buy(fmt.Sprint("lost-", i))
	}
	fmt.Println("breaker:", shop.State("phone"))
	for _, id := range []string{"o2", "o3", "o4"} {
		err := buy(id)
		fmt.Printf("%s: %v (busy: %v)\n", id, err, errors.Is(err, degrade.ErrBusy))
	}

	redis.down = false // Redis is back; after OpenFor (10s) it is recalibrated
	clock.Advance(10 * time.Second)
	fmt.Println("o5:", buy("o5")) // this call starts the recalibration: busy until it ends
	for e := range events {
		fmt.Println("breaker:", e.From, "->", e.To)
		if e.To == degrade.Primary {
			break
		}
	}
	fmt.Println("o6:", buy("o6"))

	r, _ := redis.Levels(ctx, "phone")
	s, _ := sql.Levels(ctx, "phone")
	fmt.Println("held in Redis:", r.Held, "held in SQL:", s.Held)
	// Output:
	// o1: <nil>
	// breaker: degraded
	// o2: <nil> (busy: false)
	// o3: <nil> (busy: false)
	// o4: order "o4": degrade: busy, retry later (busy: true)
	// o5: order "o5": degrade: busy, retry later
	// breaker: primary -> degraded
	// breaker: degraded -> recalibrating
	// breaker: recalibrating -> primary
	// o6: <nil>
	// held in Redis: 2 held in SQL: 4
}

// switchable is a gate whose Deduct fails like a dead connection. It
// embeds the whole tiered.GateStore, so the wrapper forwards every
// interface the flow needs.
type switchable struct {
	tiered.GateStore
	down bool
}

func (s *switchable) Deduct(ctx context.Context, o stock.Order) error {
	if s.down {
		return errors.New("dial tcp 127.0.0.1:6379: connection refused")
	}
	return s.GateStore.Deduct(ctx, o)
}
