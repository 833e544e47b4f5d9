package redisstock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock/redisstock"
)

// loadHook records the scripts loaded with SCRIPT LOAD (by SHA1) and the
// SHA1s of the EVALSHAs a pipeline sent that the server answered NOSCRIPT.
type loadHook struct {
	mu     sync.Mutex
	loaded []string
	missed map[string]bool
}

func (h *loadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) == 3 && cmd.Name() == "script" && strings.EqualFold(args[1].(string), "load") {
			sum := sha1.Sum([]byte(args[2].(string)))
			h.mu.Lock()
			h.loaded = append(h.loaded, hex.EncodeToString(sum[:]))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *loadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "evalsha" && c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
				h.missed[args[1].(string)] = true
			}
		}
		return err
	}
}

// A server that lost its scripts (SCRIPT FLUSH, a restart) gets loaded
// only the scripts the Store's pipelines missed, each once, not every
// script of the Store. A Deduct pipelines on a Cluster, a PutOnSale on any
// server.
func TestNoScriptLoadsOnlyTheScriptsThePipelineRan(t *testing.T) {
	// On miniredis only: flushing a shared server's script cache would
	// disturb the other tests.
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		if err := fx.c.ScriptFlush(fx.ctx()).Err(); err != nil {
			t.Fatal(err)
		}
		h := &loadHook{missed: map[string]bool{}}
		fx.c.AddHook(h)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1), it("b", 2))), nil, "Deduct after SCRIPT FLUSH")
		fx.want("a", 9, 1, 0)
		fx.want("b", 8, 2, 0)
		fx.sale("c", 10, 0, time.Minute)
		fx.want("c", 10, 0, 0)
		h.mu.Lock()
		defer h.mu.Unlock()
		seen := map[string]bool{}
		for _, sha := range h.loaded {
			if !h.missed[sha] {
				t.Errorf("SCRIPT LOAD of %s, which no pipeline missed", sha)
			}
			if seen[sha] {
				t.Errorf("SCRIPT LOAD of %s twice", sha)
			}
			seen[sha] = true
		}
		if len(h.missed) == 0 || len(h.loaded) == 0 {
			t.Errorf("pipelines missed %d scripts and %d were loaded, want some of each", len(h.missed), len(h.loaded))
		}
		t.Logf("pipelines missed %d scripts; %d of the Store's %d scripts loaded", len(h.missed), len(h.loaded), redisstock.ScriptCount())
	})
}
