package redisstock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

type rh8Key struct{}

// rh8FailBind lets the commands naming key (the SKU's lines hash: the
// script that takes the stock), in a context marked with rh8Key, run and
// then loses their replies: the attempt stops (its process dies, its
// connection drops) right after its stock is taken. (When the bind of an
// entry that exists was a round trip after the one that took the stock,
// the attempt stopped with its stock taken and its token on no entry.)
type rh8FailBind struct{ key string }

func (h rh8FailBind) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h rh8FailBind) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.lose(ctx, []redis.Cmder{cmd}, next(ctx, cmd))
	}
}
func (h rh8FailBind) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.lose(ctx, cmds, next(ctx, cmds))
	}
}

func (h rh8FailBind) lose(ctx context.Context, cmds []redis.Cmder, err error) error {
	if ctx.Value(rh8Key{}) == nil || err != nil {
		return err
	}
	for _, c := range cmds {
		if slices.Contains(c.Args(), any(h.key)) {
			for _, c := range cmds {
				c.SetErr(errLostReply)
			}
			return errLostReply
		}
	}
	return nil
}

// Two attempts of one order on a Cluster (a retry while the first still
// runs): A is refused and is about to leave the entry it created; B finds
// the entry, takes the stock, and stops right after. A's release must find B's token on the entry and leave it: an
// entry deleted under B's hold frees the ID, and another order binds it
// with other items and takes stock while the first still holds 2 units
// under the same ID (and a Confirm of the ID confirms the newcomer).
func TestReviewHotEntryDeletedUnderAHoldBetweenPipelineAndBind(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		fx.c.AddHook(pauseHook{})
		fx.c.AddHook(rh8FailBind{key: fx.s.LinesKey("a")})
		fx.sale("a", 1, 0, 2*time.Hour)
		fx.sale("b", 10, 0, time.Hour)
		o := ord("o1", "u1", it("a", 2))
		pa := newPause(fx.s.DirKey("o1"))
		doneA := make(chan error, 1)
		go func() { doneA <- fx.s.Deduct(pa.ctx(fx.ctx()), o) }()
		pa.wait(t) // A was refused (sold out) and is about to leave the entry
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "more", SKU: "a", Units: 1}), nil, "Restock")
		unknown(t, fx.s.Deduct(context.WithValue(fx.ctx(), rh8Key{}, true), o), "B, stopped once its stock is taken")
		fx.want("a", 0, 2, 0) // B's hold
		pa.release()
		is(t, <-doneA, stock.ErrSoldOut, "A")
		err := fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 1)))
		if err == nil {
			lv, _ := fx.s.Levels(fx.ctx(), "b")
			t.Errorf("another order bound o1 and took b (%+v) while o1 holds 2 of a: want ErrConflict", lv)
		}
		fx.want("a", 0, 2, 0)
	})
}

// The same window without a second attempt: an order ID reused after its
// old entry passed Retention (not yet deleted: the field is there). The
// new order takes its stock and stops right after: its entry must
// already be written over the old one, or the old
// entry reads as absent, and the next order under the ID, with other
// items, binds it and takes stock too: two live orders under one ID.
//
// Unbatched (MaxBatch 1), the first round trip runs stock_deduct.lua, which
// takes the stock of an ID whose record is past Retention; batched, the
// hot script leaves such an order to a second call.
func TestReviewHotReusedIDHoldWithoutEntryAfterPipeline(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		cfg := redisstockConfig(fx, time.Second)
		cfg.MaxBatch = 1
		fx.s = newStore(t, fx.c, cfg)
		fx.c.AddHook(rh8FailBind{key: fx.s.LinesKey("a")})
		fx.sale("a", 10, 0, time.Hour)
		fx.sale("b", 10, 0, time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u0", it("a", 1))), nil, "the ID's first order")
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm it")
		elapse(fx, 1500*time.Millisecond) // its record and entry are past Retention
		unknown(t, fx.s.Deduct(context.WithValue(fx.ctx(), rh8Key{}, true), ord("o1", "u1", it("a", 2))),
			"a new order under o1, stopped once its stock is taken")
		fx.want("a", 7, 2, 1)
		err := fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 1)))
		if err == nil {
			lv, _ := fx.s.Levels(fx.ctx(), "b")
			t.Errorf("a third order bound o1 and took b (%+v) while o1 (u1) holds 2 of a: want ErrConflict", lv)
		}
	})
}

func redisstockConfig(fx *fixture, keep time.Duration) redisstock.Config {
	return redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: keep}
}
