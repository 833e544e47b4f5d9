package redisstock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
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

// failOtherwiseHook makes the first pipeline that meets NOSCRIPT for two
// scripts or more see one of them fail with another error (a connection
// reset, as one node of a Cluster may give while another answers): the
// script of that command is missed only when the pipeline is sent again.
type failOtherwiseHook struct {
	mu   sync.Mutex
	done bool
}

func (h *failOtherwiseHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *failOtherwiseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *failOtherwiseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.done {
			return err
		}
		var shas []string
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "evalsha" && c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
				if sha := args[1].(string); !slices.Contains(shas, sha) {
					shas = append(shas, sha)
				}
			}
		}
		if len(shas) < 2 {
			return err
		}
		h.done = true
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "evalsha" && args[1].(string) == shas[len(shas)-1] {
				c.SetErr(errors.New("read tcp 127.0.0.1:7001: connection reset by peer"))
			}
		}
		return err
	}
}

// A pipelined command that failed otherwise on its first send and meets
// NOSCRIPT when the pipeline is sent again gets its script loaded too: the
// call succeeds once, as it does when every script is missed at once. A
// reclaim pass that also deletes ended line records pipelines two scripts.
func TestNoScriptOnTheResendIsLoadedToo(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: redisstock.MinRetention})
		fx.sale("a", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct o1")
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("a", 2))), nil, "Deduct o2")
		elapse(fx, 2*time.Minute)
		if err := fx.c.ScriptFlush(fx.ctx()).Err(); err != nil {
			t.Fatal(err)
		}
		h := &failOtherwiseHook{}
		fx.c.AddHook(h)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if !h.done {
			t.Fatal("no pipeline missed two scripts: the test tested nothing")
		}
		if err != nil || len(got) != 1 || got[0].OrderID != "o2" {
			t.Fatalf("ReclaimExpired = %+v, %v; want o2's hold", got, err)
		}
		fx.want("a", 10, 0, 0)
	})
}
