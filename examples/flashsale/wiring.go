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
	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// system is everything the sale runs on: the shop (a stockguard.Shop: the
// Redis gate, the database record, the breaker and the reconciler), the
// Redis the queue and the limiter use, and how to tear it all down. This
// file is the only one that knows which backend is which.
type system struct {
	name   string // e.g. "miniredis + SQLite"
	prefix string // unique per run: keys, streams and tables

	// shop is the order path buyers, payers and the queue's consumers use,
	// wired as the README wires it; its hand-off goes through q.
	shop    *stockguard.Shop
	gate    *redisstock.Store
	record  *sqlstock.Store
	q       *queue
	breaker *breakerLog
	// fixes counts the units the shop's reconciler corrected during the
	// sale (final is set for the closing pass, whose corrections the
	// report lists itself).
	fixes fixes

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
	// The client of a hot path (redisstock.FailFast): a refused server
	// fails a call at once, so the breaker sees an outage fast. Its
	// timeouts are longer than FailFast's, for a loaded machine (a dial or
	// a read that a starved process takes 250ms for would trip the
	// breaker).
	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{
		Addrs: []string{addr}, PoolSize: 4 * cfg.workers,
		DialTimeout: time.Second, ReadTimeout: time.Second, PoolTimeout: time.Second,
	}))
	s.cleanup = append(s.cleanup, func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	s.rdb = rdb
	if cfg.redisAddr != "" {
		s.cleanup = append(s.cleanup, func() { deletePrefix(rdb, s.prefix) })
	}

	// The hand-off's queue (-queue: a stream on the Redis the limiter
	// uses, NATS JetStream or RabbitMQ); the shop's consumers report each
	// delivery to the queue's counts too.
	b, err := openBroker(ctx, cfg, s, max(200*time.Millisecond, cfg.hold/5))
	if err != nil {
		return nil, err
	}
	if b.close != nil {
		s.cleanup = append(s.cleanup, b.close)
	}
	s.q = newQueue(b)
	s.obs = s.q.observer(obs)

	db, tables, name, err := openDB(ctx, cfg, s)
	if err != nil {
		return nil, err
	}
	s.name += " + " + name
	s.breaker = &breakerLog{start: time.Now()}
	s.shop, err = stockguard.New(rdb, db.DB, stockguard.Config{
		Gate:   redisstock.Config{Prefix: s.prefix},
		Record: tables,
		// The hand-off: each order the gate holds is published to the
		// queue with the gate's hold time; past -max-lag of lag new
		// orders are turned away as busy (see shop.buy).
		Handoff:         s.q,
		HandoffRecorder: handoff.RecorderConfig{MaxLag: cfg.maxLag},
		// The breaker's timings scale with the sale's length, so a short
		// sale still shows the whole cycle; while it is open the database
		// takes orders at -fallback-rate.
		Breaker: degrade.Config{
			OpenFor:       max(200*time.Millisecond, cfg.duration/10),
			RampInterval:  max(100*time.Millisecond, cfg.duration/20),
			FallbackLimit: rate.Limit(cfg.fallbackRate),
			FallbackBurst: max(1, cfg.fallbackRate/10),
			OnStateChange: s.breaker.note,
		},
		Reconcile: reconcile.Config{
			MaxAutoFix:   -1, // the sale's own figures: fix any size, and report it
			OnCorrection: s.fixes.note,
		},
		Reclaim:  stock.ReclaimerConfig{Interval: max(20*time.Millisecond, cfg.hold/10)},
		Observer: s.obs,
	})
	if err != nil {
		return nil, err
	}
	s.cleanup = append(s.cleanup, s.shop.Close)
	s.gate, s.record = s.shop.Gate(), s.shop.Record()
	if err := s.shop.CreateTables(ctx); err != nil {
		return nil, err
	}
	if cfg.mysqlDSN != "" || cfg.postgresDSN != "" {
		s.cleanup = append(s.cleanup, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, t := range s.record.Tables() {
				_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t)
			}
		})
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

// place takes the order: normally a hold at the gate handed to the queue
// (tiered.Pending), while the breaker is open a hold at the record itself
// (tiered.Recorded). An unknown outcome is resolved by placing the same
// order again.
func (s *system) place(ctx context.Context, o stock.Order) (tiered.Placement, error) {
	var p tiered.Placement
	var err error
	for range 3 {
		if p, err = s.shop.Place(ctx, o); !errors.Is(err, stock.ErrUnknownOutcome) {
			return p, err
		}
	}
	return p, err
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
