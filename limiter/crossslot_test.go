package limiter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/limiter"
)

// NewComposite refuses AllowCrossSlot on a *redis.ClusterClient, where a
// call whose keys span slots can never be one script.
func TestCompositeRefusesAllowCrossSlotOnCluster(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	_, err := limiter.NewComposite(rdb, limiter.CompositeConfig{
		AllowCrossSlot: true,
		Dimensions:     []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(1)}},
	})
	if !errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("NewComposite on a ClusterClient with AllowCrossSlot = %v; want ErrInvalid", err)
	}
}

// hiddenScripter hides the client's type from NewComposite, as a wrapper
// (instrumentation, a proxy client) does.
type hiddenScripter struct{ redis.Scripter }

// crossSlotScripter answers every script call with the server's CROSSSLOT
// error, and counts calls.
type crossSlotScripter struct {
	redis.Scripter
	calls atomic.Int64
}

func (s *crossSlotScripter) reply(ctx context.Context) *redis.Cmd {
	s.calls.Add(1)
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(redis.ErrCrossSlot)
	return cmd
}

func (s *crossSlotScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.reply(ctx)
}

func (s *crossSlotScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.reply(ctx)
}

// A CROSSSLOT reply is the caller's error (matching ErrCrossSlot, not
// ErrUnavailable), never a Redis outage: the Policy neither decides the
// call (no FailOpen admission) nor starts its Backoff or reports it.
func TestCrossSlotReplyIsCallerError(t *testing.T) {
	_, mini := newMini(t)
	s := &crossSlotScripter{Scripter: mini}
	var reported atomic.Int64
	c := newComposite(t, s, limiter.CompositeConfig{
		AllowCrossSlot: true,
		Dimensions:     []limiter.Dimension{{Name: "user", Limit: limiter.PerSecond(1)}, {Name: "sku", Limit: limiter.PerSecond(1)}},
		Policy:         limiter.Policy{OnError: limiter.FailOpen, Clock: newManualClock(), OnRedisError: func(error) { reported.Add(1) }},
	})
	for i := range 3 {
		d, err := c.Allow(bg, limiter.Request{Values: []string{"alice", "sku-1"}})
		if !errors.Is(err, limiter.ErrCrossSlot) || errors.Is(err, limiter.ErrUnavailable) || d.Allowed || d.Degraded {
			t.Fatalf("call %d answered CROSSSLOT = %+v, %v; want an error matching ErrCrossSlot and not ErrUnavailable, no decision", i, d, err)
		}
	}
	if n := s.calls.Load(); n != 3 {
		t.Fatalf("Redis called %d times for 3 calls; want 3 (a CROSSSLOT reply starts no Backoff)", n)
	}
	if n := reported.Load(); n != 0 {
		t.Fatalf("OnRedisError told %d times; want 0 (CROSSSLOT is no Redis failure)", n)
	}
	if err := c.Reset(bg, limiter.Request{Values: []string{"alice", "sku-1"}}); !errors.Is(err, limiter.ErrCrossSlot) || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("Reset answered CROSSSLOT = %v; want an error matching ErrCrossSlot and not ErrUnavailable", err)
	}
}

// On a real Redis Cluster behind a wrapper NewComposite cannot see
// through, AllowCrossSlot does not turn a limit off: calls whose keys span
// slots fail with ErrCrossSlot and count nothing, none is admitted under
// FailOpen, and single-slot calls are still decided by Redis.
func TestCompositeCrossSlotOnClusterDoesNotFailOpen(t *testing.T) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := newManualClock()
	c, err := limiter.NewComposite(hiddenScripter{rdb}, limiter.CompositeConfig{
		Prefix:         prefix(t),
		AllowCrossSlot: true,
		Dimensions: []limiter.Dimension{
			{Name: "user", Limit: limiter.Limit{Rate: 1, Period: time.Hour}},
			{Name: "sku", Limit: limiter.Limit{Rate: 1, Period: time.Hour}},
		},
		Policy: limiter.Policy{OnError: limiter.FailOpen, Clock: clock},
	})
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for range 3 {
		d, err := c.Allow(bg, limiter.Request{Values: []string{"alice", "sku-1"}}) // two slots
		if !errors.Is(err, limiter.ErrCrossSlot) {
			t.Fatalf("a call spanning slots on a Cluster = %+v, %v; want ErrCrossSlot", d, err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed > 0 {
		t.Fatalf("3 calls spanning slots on a limit of 1 an hour: %d allowed; want 0", allowed)
	}
	for i := range 2 {
		d, err := c.Allow(bg, limiter.Request{Values: []string{"alice", ""}})
		if err != nil || d.Degraded || d.Allowed != (i == 0) {
			t.Fatalf("single-slot call %d after them = %+v, %v; want decided by Redis (not degraded), allowed only the first time", i, d, err)
		}
	}
}
