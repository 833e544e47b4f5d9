package redisstock_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// beforeTake runs f once, before the first take (a deduct script call) it
// sees go out.
type beforeTake struct {
	once sync.Once
	f    func()
}

func (h *beforeTake) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *beforeTake) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isTake(cmd) {
			h.once.Do(h.f)
		}
		return next(ctx, cmd)
	}
}

func (h *beforeTake) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if isTake(c) {
				h.once.Do(h.f)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// isTake reports whether c runs a deduct script (stock_deduct.lua or
// stock_deduct_hot.lua), by EVALSHA or by EVAL of its body.
func isTake(c redis.Cmder) bool {
	args := c.Args()
	if len(args) < 2 {
		return false
	}
	h, _ := args[1].(string)
	switch c.Name() {
	case "eval":
		h = fmt.Sprintf("%x", sha1.Sum([]byte(h)))
	case "evalsha":
	default:
		return false
	}
	return h == redisstock.DeductScriptHash() || h == redisstock.HotScriptHash() || h == redisstock.OneScriptHash()
}

// On a Cluster a Deduct binds its order ID, then takes: when the gate
// loses its data between the two (the directory entry with it) and the SKU
// is put back (a rebuild) before the take, the take must not hold stock
// under an entry that no longer exists. The Deduct binds again and holds
// the order under its own entry: the order reads as held, with the units
// its SKU counts held. Single-SKU orders (batched, or not) and an order on
// two slots.
func TestClusterTakeAfterTheStateWasRecreated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int
		items []stock.Item
	}{
		{"batched", 0, []stock.Item{it("a", 2)}},
		{"unbatched", 1, []stock.Item{it("a", 2)}},
		{"two slots", 0, []stock.Item{it("a", 2), it("b", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachCluster(t, func(t *testing.T, fx *fixture) {
				cfg := fx.cfg
				cfg.MaxBatch = tc.batch
				s := newStore(t, fx.c, cfg)
				fx.s = s
				for _, it := range tc.items {
					fx.sale(it.SKU, 10, 0, time.Minute)
				}
				// The Store has seen the states' generations.
				is(t, s.Deduct(fx.ctx(), ord("warm", "u0", tc.items...)), nil, "first order")
				is(t, s.Revert(fx.ctx(), "warm"), nil, "its revert")
				fx.c.AddHook(&beforeTake{f: func() {
					fx.lose()
					for _, it := range tc.items {
						fx.sale(it.SKU, 10, 0, time.Minute) // recreated: a new generation
					}
				}})
				is(t, s.Deduct(fx.ctx(), ord("o1", "u1", tc.items...)), nil, "Deduct across the loss")
				infos, err := s.Orders(fx.ctx(), []string{"o1"})
				if err != nil {
					t.Fatal(err)
				}
				if infos[0].State != stock.StateHeld {
					t.Fatalf("o1 reads as %v, want held: its stock is held under no directory entry", infos[0].State)
				}
				for _, it := range tc.items {
					fx.want(it.SKU, 10-it.Qty, it.Qty, 0)
				}
				is(t, s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
			})
		})
	}
}
