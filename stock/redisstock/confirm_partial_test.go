package redisstock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// loseOne fails, unsent, the command of the first pipeline carrying two or
// more scripts naming order whose arguments name sku (one node of a
// Cluster unreachable for that call); the rest of the pipeline is sent.
type loseOne struct {
	order, sku string
	mu         sync.Mutex
	done       bool
}

func (h *loseOne) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loseOne) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loseOne) names(c redis.Cmder, what string, sub bool) bool {
	for _, a := range c.Args() {
		if s, ok := a.(string); ok && (s == what || sub && strings.Contains(s, what)) {
			return true
		}
	}
	return false
}

func (h *loseOne) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		armed := !h.done
		h.mu.Unlock()
		if !armed {
			return next(ctx, cmds)
		}
		scripts, drop := 0, -1
		for i, c := range cmds {
			if (c.Name() == "evalsha" || c.Name() == "eval") && h.names(c, h.order, false) {
				scripts++
				if h.names(c, "{"+h.sku+"}", true) {
					drop = i
				}
			}
		}
		if scripts < 2 || drop < 0 {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		h.done = true
		h.mu.Unlock()
		rest := append(append([]redis.Cmder{}, cmds[:drop]...), cmds[drop+1:]...)
		err := next(ctx, rest)
		cmds[drop].SetErr(errLostReply)
		if err == nil {
			err = errLostReply
		}
		return err
	}
}

// partlyLostConfirm sells o1 (a unit of lo and one of hi, two slots) and
// confirms it: the Confirm confirms the first group, then sends its last
// call, whose script for the first group is lost (that node unreachable)
// while the second group's runs; the caller retries, and the retry finds
// every line confirmed. Retention is a minute.
func partlyLostConfirm(t *testing.T, fx *fixture) (lo, hi string) {
	t.Helper()
	fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Minute})
	lo, hi = skusInSlotOrder(t, fx)
	fx.sale(lo, 10, 0, time.Hour)
	fx.sale(hi, 10, 0, time.Hour)
	is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
	fx.loadScripts()
	fx.c.AddHook(&loseOne{order: "o1", sku: lo})
	if err := fx.s.Confirm(fx.ctx(), "o1"); err == nil {
		t.Fatal("Confirm whose last call lost a group: nil")
	}
	is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm retried")
	return lo, hi
}

// Every record of an order confirmed after a partly lost last call ends
// with it: once Retention has passed and the reclaimer ran, the order ID
// is free, and a new order under it takes its own units.
func TestConfirmRetryAfterAPartialLastCallEndsEveryLine(t *testing.T) {
	eachMiniCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := partlyLostConfirm(t, fx)
		fx.want(lo, 9, 0, 1)
		fx.want(hi, 9, 0, 1)
		elapse(fx, 10*time.Minute) // well past Retention
		fx.reclaim()
		fx.reclaim()
		if rec, ok, err := fx.s.Line(fx.ctx(), lo, "o1"); err != nil || ok {
			t.Errorf("%s's record of o1, 10 minutes after the order ended (Retention 1m): %v (%v)", lo, rec, err)
		}
		orphans, _, err := fx.s.Audit(fx.ctx())
		if err != nil || len(orphans) != 0 {
			t.Errorf("Audit: orphans %q, %v", orphans, err)
		}
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct o1 anew after Retention")
		fx.want(lo, 8, 1, 1)
		fx.want(hi, 8, 1, 1)
	})
}
