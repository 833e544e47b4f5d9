package stockguard_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// The README's shop, its client built with redisstock.FailFast, on a Redis
// that stops answering (paused). README, "The Redis client of the hot
// path": FailFast makes "a client that fails within a quarter of a
// second ... so checkout requests are not held and the breaker counts the
// outage while it happens". Through the Shop a Deduct takes one of those,
// not two: the timed-out gate call is an unknown outcome, which the
// breaker answers at once rather than sending the order to the gate again
// within the call. A retry with the same order once Redis answers takes it.
func TestShopDeductOnAPausedRedisFailsWithinFailFastsTimeout(t *testing.T) {
	redis.SetLogger(quietRedisLog{})
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server")
	}
	const port = "21019"
	srv := exec.Command("redis-server", "--port", port, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGCONT); _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatal("redis-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:" + port}}))
	t.Cleanup(func() { rdb.Close() })
	shop, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, stockguard.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	ctx := t.Context()
	if err := shop.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10}); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("warm", 1)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = shop.Deduct(ctx, order("o1", 1))
	took := time.Since(start)
	t.Logf("deduct with Redis paused: %v after %v", err, took)
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Errorf("deduct with Redis paused: %v, want an error matching stock.ErrUnknownOutcome", err)
	}
	// One read timeout (250ms) and the scheduling of a busy machine, not
	// two timeouts (500ms and more).
	if took > 475*time.Millisecond {
		t.Errorf("a Deduct with Redis paused took %v; FailFast's client fails within a quarter of a second, and the call waits for one attempt, not two", took)
	}
	if err := srv.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := shop.Deduct(ctx, order("o1", 1)); err != nil {
		t.Errorf("retry once Redis answers: %v", err)
	}
}

// quietRedisLog drops go-redis's log lines.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...interface{}) {}
