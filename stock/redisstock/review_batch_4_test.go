package redisstock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

// rbServerRefusal is an error reply of the server (a redis.Error): the
// command ran and refused, or never ran.
type rbServerRefusal string

func (e rbServerRefusal) Error() string { return string(e) }
func (rbServerRefusal) RedisError()     {}

// rbBindRefuser makes the master of the order's directory entry refuse the
// bind (its HSETNX, or the bind script; as a master out of memory,
// read-only or loading does), while the rest of the pipeline runs.
type rbBindRefuser struct{ armed atomic.Bool }

var rbBindHash = func() string {
	h := sha1.Sum([]byte(lua.Script("stock_dir_bind.lua")))
	return hex.EncodeToString(h[:])
}()

func (h *rbBindRefuser) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *rbBindRefuser) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *rbBindRefuser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !h.armed.Load() {
			return next(ctx, cmds)
		}
		var rest, refused []redis.Cmder
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && (c.Name() == "evalsha" && args[1] == rbBindHash || c.Name() == "hsetnx") {
				refused = append(refused, c)
			} else {
				rest = append(rest, c)
			}
		}
		if len(refused) == 0 {
			return next(ctx, cmds)
		}
		var err error
		if len(rest) > 0 {
			err = next(ctx, rest)
		}
		for _, c := range refused {
			c.SetErr(rbServerRefusal("OOM command not allowed when used memory > 'maxmemory'."))
		}
		if err == nil {
			err = refused[0].Err()
		}
		return err
	}
}

// On a Cluster an order's bind and its deduct script go to different
// masters. When the directory's master refuses the bind (a server error
// reply: a "certain" error), Deduct may answer that certain error only if
// nothing is held: a caller told nothing was applied must not leave units
// held under no directory entry until the reclaimer returns them.
func TestReviewBatchRefusedBindLeavesNothingHeld(t *testing.T) {
	for _, maxBatch := range []int{0, 1} { // slot-batched, and unbatched
		t.Run("MaxBatch"+strconv.Itoa(maxBatch), func(t *testing.T) {
			eachCluster(t, func(t *testing.T, fx *fixture) {
				cfg := fx.cfg
				cfg.Prefix, cfg.MaxBatch = "", maxBatch
				s := newStore(t, fx.c, cfg)
				h := &rbBindRefuser{}
				fx.c.AddHook(h)
				if err := s.PutOnSale(fx.ctx(), stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
				h.armed.Store(true)
				err := s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2)))
				h.armed.Store(false)
				if err == nil {
					t.Fatal("Deduct whose bind was refused: nil")
				}
				lv, lerr := s.Levels(fx.ctx(), "a")
				if lerr != nil {
					t.Fatal(lerr)
				}
				if !errors.Is(err, stock.ErrUnknownOutcome) && lv.Held != 0 {
					t.Fatalf("MaxBatch %d: Deduct failed with a certain error (%v), yet %d units are held (available %d)",
						maxBatch, err, lv.Held, lv.Available)
				}
			})
		})
	}
}
