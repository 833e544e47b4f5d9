package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// system is everything the sale runs on: the Redis gate, the database
// record, the Redis the queue and the limiter use, and how to tear it all
// down. This file is the only one that knows which backend is which.
type system struct {
	name   string // e.g. "miniredis + SQLite"
	prefix string // unique per run: keys, streams and tables

	gate            stock.Manager
	gateReclaimer   stock.Reclaimer
	record          stock.Manager
	recordReclaimer stock.Reclaimer

	rdb   redis.UniversalClient // the queue's and the limiter's Redis
	users limiter.Limiter       // per-user attempts
	redis redisSwitch           // stops and restarts Redis for -chaos

	cleanup []func()
}

// redisSwitch takes the gate's Redis away and brings it back.
type redisSwitch interface {
	stop()
	start() error
}

// deducted tells where a hold was taken.
type deducted struct {
	direct   bool      // by the record alone (the gate was unavailable)
	deadline time.Time // the hold's deadline
}

// errBusy: the order was turned away to protect a degraded store.
var errBusy = errors.New("flashsale: busy, retry later")

// build connects (or starts) the stores named by cfg and puts nothing on
// sale yet.
func build(ctx context.Context, cfg config) (*system, error) {
	s := &system{prefix: "fs" + randomHex(4)}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()

	addr := cfg.redisAddr
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("start miniredis: %w", err)
		}
		s.cleanup = append(s.cleanup, m.Close)
		s.redis = miniSwitch{m}
		addr = m.Addr()
		s.name = "miniredis"
	} else {
		s.name = "redis " + addr
		if cfg.chaos {
			p, err := newProxy(addr)
			if err != nil {
				return nil, err
			}
			s.cleanup = append(s.cleanup, p.close)
			s.redis = p
			addr = p.addr()
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * cfg.workers, MaxRetries: 2,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	s.cleanup = append(s.cleanup, func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	s.rdb = rdb
	if cfg.redisAddr != "" {
		s.cleanup = append(s.cleanup, func() { deletePrefix(rdb, s.prefix) })
	}

	gate, err := redisstock.New(rdb, redisstock.Config{Prefix: s.prefix})
	if err != nil {
		return nil, err
	}
	s.gate, s.gateReclaimer = gate, gate

	rec, name, err := openRecord(ctx, cfg, s)
	if err != nil {
		return nil, err
	}
	s.name += " + " + name
	s.record, s.recordReclaimer = rec, rec

	if s.users, err = newUserLimiter(rdb, cfg, s.prefix, cfg.redisAddr != ""); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// recordStore is a stock backend that also returns its expired holds.
type recordStore interface {
	stock.Manager
	stock.Reclaimer
}

// openRecord opens the database record. It stands on memstock until the SQL
// backend is wired in.
func openRecord(_ context.Context, _ config, _ *system) (recordStore, string, error) {
	return memstock.New(nil), "memstock", nil
}

// newUserLimiter limits each user's attempts. On a real Redis the counts
// live there, shared by every node, with a tighter in-process limit while
// Redis is down. The embedded sale is one process, where an in-process
// limiter is exact and spares miniredis (whose scripts are slow) a script
// per attempt.
func newUserLimiter(rdb redis.Scripter, cfg config, prefix string, shared bool) (limiter.Limiter, error) {
	local := limiter.Limit{Rate: cfg.userRate, Period: time.Second, Burst: cfg.userRate}
	if !shared {
		return limiter.NewLocal(limiter.LocalConfig{Limit: local})
	}
	fallback, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: max(1, cfg.userRate/2), Period: time.Second}})
	if err != nil {
		return nil, err
	}
	return limiter.NewRedis(rdb, limiter.RedisConfig{
		Limit:  limiter.Limit{Rate: cfg.userRate, Period: time.Second, Burst: cfg.userRate},
		Prefix: prefix + ":rl",
		Policy: limiter.Policy{Fallback: fallback, Backoff: 50 * time.Millisecond},
	})
}

// deduct takes the order's hold at the gate. An unknown outcome is resolved
// by repeating the call with the same order ID.
func (s *system) deduct(ctx context.Context, o stock.Order, hold time.Duration) (deducted, error) {
	var err error
	for i := 0; i < 3; i++ {
		deadline := time.Now().Add(hold)
		if err = s.gate.Deduct(ctx, o); err == nil {
			return deducted{deadline: deadline}, nil
		}
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			break
		}
	}
	return deducted{}, err
}

// gateConfirm confirms a hold taken at the gate.
func (s *system) gateConfirm(ctx context.Context, id string) error {
	return s.gate.Confirm(ctx, id)
}

// close releases everything build acquired, last first.
func (s *system) close() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
	s.cleanup = nil
}

// deletePrefix removes the keys of this run from a shared Redis.
func deletePrefix(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+":*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		rdb.Unlink(ctx, batch...)
	}
}

// miniSwitch stops and restarts an in-process miniredis; its data survives.
type miniSwitch struct{ m *miniredis.Miniredis }

func (w miniSwitch) stop()        { w.m.Close() }
func (w miniSwitch) start() error { return w.m.Restart() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
