package otelstock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// redisServers are the Redis servers the tests run on: an in-process
// miniredis, and the Redis STOCKGUARD_REDIS_ADDR names when it is set.
func redisServers(t *testing.T) []string {
	t.Helper()
	out := []string{"miniredis"}
	if os.Getenv("STOCKGUARD_REDIS_ADDR") != "" {
		out = append(out, "redis")
	}
	return out
}

// newRedisStore returns a redisstock Store reporting to h on server (see
// redisServers), under a prefix of its own that is removed afterwards.
func newRedisStore(t *testing.T, h *harness, clk *fakeClock, server string) *redisstock.Store {
	t.Helper()
	addr := os.Getenv("STOCKGUARD_REDIS_ADDR")
	if server == "miniredis" {
		addr = miniredis.RunT(t).Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	prefix := fmt.Sprintf("otel%d", rand.Uint64())
	t.Cleanup(func() {
		ctx := context.Background()
		for it := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator(); it.Next(ctx); {
			rdb.Del(ctx, it.Val())
		}
		_ = rdb.Close()
	})
	s, err := redisstock.New(rdb, redisstock.Config{Prefix: prefix, Clock: clk, Observer: h.a.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRedisstockScript(t *testing.T) {
	t.Parallel()
	for _, server := range redisServers(t) {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			redisScript(t, server)
		})
	}
}

func redisScript(t *testing.T, server string) {
	h := newHarness(t, otelstock.Config{})
	clk := newClock()
	s := newRedisStore(t, h, clk, server)
	if _, err := h.a.RegisterLevels(otelstock.Levels{Source: s, Store: "s", SKUs: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	script(t, s, clk)
	checkScript(t, h, "redisstock")

	// Every Deduct went out in a batch of one (they came one at a time).
	ms := h.collect(t)
	c := component("redisstock")
	if n, total := hist[int64](t, metric(t, ms, "stockguard.batch.size", "{call}"), c, deduct); n != 5 || total != 5 {
		t.Errorf("stockguard.batch.size: %d batches of %d calls, want 5 of 5", n, total)
	}
	if n, _ := hist[float64](t, metric(t, ms, "stockguard.batch.wait", "s"), c, deduct); n != 5 {
		t.Errorf("stockguard.batch.wait: %d batches, want 5", n)
	}
	if n, _ := hist[float64](t, metric(t, ms, "stockguard.batch.duration", "s"), c, deduct, ok); n != 5 {
		t.Errorf("stockguard.batch.duration{ok}: %d batches, want 5", n)
	}
}

// Concurrent Deducts are sent together: the batch sizes add up to the
// Deducts, and each batch span is the child of a Deduct span.
func TestRedisstockBatches(t *testing.T) {
	t.Parallel()
	for _, server := range redisServers(t) {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			redisBatches(t, server)
		})
	}
}

func redisBatches(t *testing.T, server string) {
	h := newHarness(t, otelstock.Config{})
	s := newRedisStore(t, h, newClock(), server)
	ctx := context.Background()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: 1000}); err != nil {
		t.Fatal(err)
	}
	const buyers = 40
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			id := "o" + strconv.Itoa(i)
			if err := s.Deduct(ctx, stock.Order{ID: id, UserID: "u" + id, Items: []stock.Item{{SKU: "hot", Qty: 1}}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	ms := h.collect(t)
	c := component("redisstock")
	if n := sum(t, metric(t, ms, "stockguard.calls", "{call}"), c, deduct, ok); n != buyers {
		t.Errorf("stockguard.calls{deduct ok} = %d, want %d", n, buyers)
	}
	batches, total := hist[int64](t, metric(t, ms, "stockguard.batch.size", "{call}"), c, deduct)
	if total != buyers || batches < 1 || batches > buyers {
		t.Errorf("stockguard.batch.size: %d batches of %d calls in all, want %d calls", batches, total, buyers)
	}
	t.Logf("%d deducts in %d batches", total, batches)

	deducts := map[string]bool{}
	var batchSpans, sized int64
	for _, sp := range h.spans.Ended() {
		if sp.Name() == "redisstock.deduct" {
			deducts[sp.SpanContext().SpanID().String()] = true
		}
	}
	for _, sp := range h.spans.Ended() {
		if sp.Name() != "redisstock.batch" {
			continue
		}
		batchSpans++
		if !deducts[sp.Parent().SpanID().String()] {
			t.Errorf("batch span's parent %s is no Deduct span", sp.Parent().SpanID())
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == otelstock.KeyBatchSize {
				sized += kv.Value.AsInt64()
			}
		}
	}
	if len(deducts) != buyers || batchSpans != int64(batches) || sized != buyers {
		t.Errorf("%d deduct spans, %d batch spans of %d calls; want %d, %d, %d", len(deducts), batchSpans, sized, buyers, batches, buyers)
	}
}
