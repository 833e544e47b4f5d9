package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// system is everything the sale runs on: the Redis gate, the database
// record, the Redis the queue and the limiter use, and how to tear it all
// down. This file is the only one that knows which backend is which.
type system struct {
	name   string // e.g. "miniredis + SQLite"
	prefix string // unique per run: keys, streams and tables

	gate   *redisstock.Store
	record *sqlstock.Store
	// flow is the tiered flow over gate and record, the hand-off going
	// through enqueue; the queue's consumers call its Settle.
	flow    *tiered.Manager
	enqueue func(context.Context, stock.Order) error
	// orders is the order path buyers and payers use: a breaker over the
	// flow, with the record as its fallback (see degraded.go).
	orders   *degrade.Manager
	fallback *fallback
	breaker  *breakerLog
	// recal repairs the gate from the record before the breaker sends
	// traffic back to it; final checks the two at the end of the sale.
	recal, final *reconcile.Reconciler
	repairs      *repairer

	recordDB     *sqlx.DB
	recordTables sqlstock.Config

	rdb   redis.UniversalClient // the queue's and the limiter's Redis
	users limiter.Limiter       // per-user attempts
	redis redisSwitch           // stops and restarts Redis for -chaos

	// obs is what every part reports to: the OpenTelemetry adapter with
	// -metrics, nothing otherwise.
	obs observe.Observer

	cleanup []func()
}

// redisSwitch takes the gate's Redis away and brings it back.
type redisSwitch interface {
	stop()
	start() error
}

// build connects (or starts) the stores named by cfg, each reporting to
// obs, and puts nothing on sale yet.
func build(ctx context.Context, cfg config, obs observe.Observer) (*system, error) {
	s := &system{prefix: "fs" + randomHex(4), obs: obs}
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
	// A refused dial fails at once (go-redis would otherwise try five
	// times, 100ms apart, per command), so the breaker sees an outage fast.
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * cfg.workers, MaxRetries: 2,
		DialTimeout: 200 * time.Millisecond, DialerRetries: 1, ReadTimeout: time.Second, WriteTimeout: time.Second})
	s.cleanup = append(s.cleanup, func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	s.rdb = rdb
	if cfg.redisAddr != "" {
		s.cleanup = append(s.cleanup, func() { deletePrefix(rdb, s.prefix) })
	}

	gate, err := redisstock.New(rdb, redisstock.Config{Prefix: s.prefix, Observer: obs})
	if err != nil {
		return nil, err
	}
	s.gate = gate

	rec, name, err := openRecord(ctx, cfg, s)
	if err != nil {
		return nil, err
	}
	s.name += " + " + name
	s.record = rec
	s.flow = tiered.New(gate, rec, tiered.Config{
		Recorder: tiered.RecorderFunc(func(ctx context.Context, o stock.Order) error { return s.enqueue(ctx, o) }),
		OnDrift:  func(d tiered.Drift) { s.repairs.mark(d.SKUs...) },
		Observer: obs,
	})
	if err := s.wireBreaker(cfg); err != nil {
		return nil, err
	}

	if s.users, err = newUserLimiter(rdb, cfg, s.prefix, cfg.redisAddr != "", obs); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// newUserLimiter limits each user's attempts. On a real Redis the counts
// live there, shared by every node, with a tighter in-process limit while
// Redis is down. The embedded sale is one process, where an in-process
// limiter is exact and spares miniredis (whose scripts are slow) a script
// per attempt.
func newUserLimiter(rdb redis.Scripter, cfg config, prefix string, shared bool, obs observe.Observer) (limiter.Limiter, error) {
	local := limiter.Limit{Rate: cfg.userRate, Period: time.Second, Burst: cfg.userRate}
	if !shared {
		return limiter.NewLocal(limiter.LocalConfig{Limit: local, Observer: obs})
	}
	fallback, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: max(1, cfg.userRate/2), Period: time.Second}, Observer: obs})
	if err != nil {
		return nil, err
	}
	return limiter.NewRedis(rdb, limiter.RedisConfig{
		Limit:    limiter.Limit{Rate: cfg.userRate, Period: time.Second, Burst: cfg.userRate},
		Prefix:   prefix + ":rl",
		Policy:   limiter.Policy{Fallback: fallback, Backoff: 50 * time.Millisecond},
		Observer: obs,
	})
}

// place takes the order: normally a hold at the gate handed to the queue,
// while the breaker is open a hold at the record itself. An unknown outcome
// is resolved by placing the same order again.
func (s *system) place(ctx context.Context, o stock.Order) error {
	var err error
	for range 3 {
		if err = s.orders.Deduct(ctx, o); !errors.Is(err, stock.ErrUnknownOutcome) {
			return err
		}
	}
	return err
}

// settle records an order the gate holds.
func (s *system) settle(ctx context.Context, o stock.Order) error {
	return s.flow.Settle(ctx, o)
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

func (w miniSwitch) stop() { w.m.Close() }

// start restarts the server with a fresh context. Close cancels
// miniredis's context and Restart does not renew it, and a blocking
// command (XREADGROUP BLOCK) on a cancelled context returns without
// writing a reply: every queue consumer would then wait for a reply that
// never comes, and the queue would stop draining after the outage.
func (w miniSwitch) start() error {
	w.m.Lock()
	w.m.Ctx, w.m.CtxCancel = context.WithCancel(context.Background())
	w.m.Unlock()
	return w.m.Restart()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
