package redisstock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// DefaultWaitTimeout is the WaitTimeout of a Config that sets WaitReplicas
// and no WaitTimeout (unless the client's ReadTimeout is shorter than
// twice it).
const DefaultWaitTimeout = time.Second

// MaxWaitReplicas is the largest WaitReplicas a Config may set.
const MaxWaitReplicas = 64

// waiter is a Store's replication wait (Config.WaitReplicas): after the
// writes of a request, WAIT (or WAITAOF 0) for n replicas, at most timeout,
// on the connection the writes went on.
type waiter struct {
	n       int
	timeout time.Duration
	aof     bool
	// hasAOF holds the addresses of the servers that answered WAITAOF.
	hasAOF sync.Map
}

// waitClient is the client of a Store with a replication wait: the
// client it was given, with every request that writes followed, on the
// same connection, by the wait. Requests that only read pass through. It
// overrides every writing method the Store calls on its client
// (TestWaitCoversEveryWrite checks it).
type waitClient struct {
	redis.UniversalClient
	w       *waiter
	single  *redis.Client        // set on a standalone or Sentinel client
	cluster *redis.ClusterClient // set on a Redis Cluster
}

// checkWait validates cfg's replication wait for c and resolves its
// defaults: nil when WaitReplicas is 0.
func checkWait(c redis.UniversalClient, cfg Config) (*waiter, error) {
	if cfg.WaitReplicas == 0 {
		if cfg.WaitAOF {
			return nil, &stock.InvalidError{Field: "config.WaitAOF", Reason: "set without WaitReplicas"}
		}
		return nil, nil
	}
	if cfg.WaitReplicas < 0 || cfg.WaitReplicas > MaxWaitReplicas {
		return nil, &stock.InvalidError{Field: "config.WaitReplicas", Reason: strconv.Itoa(cfg.WaitReplicas) + " is outside [0, " + strconv.Itoa(MaxWaitReplicas) + "]"}
	}
	var read time.Duration
	switch c := c.(type) {
	case *redis.Client:
		read = c.Options().ReadTimeout
	case *redis.ClusterClient:
		read = c.Options().ReadTimeout
	default:
		return nil, &stock.InvalidError{Field: "config.WaitReplicas", Reason: fmt.Sprintf("needs a *redis.Client or a *redis.ClusterClient, not a %T (a WAIT counts the writes of its own connection, and this client cannot put it on theirs)", c)}
	}
	t := cfg.WaitTimeout
	if t == 0 {
		t = DefaultWaitTimeout
		if read > 0 && 2*t > read {
			t = read / 2
		}
	}
	if t < time.Millisecond {
		return nil, &stock.InvalidError{Field: "config.WaitTimeout", Reason: t.String() + " is below 1ms"}
	}
	if read > 0 && t >= read {
		return nil, &stock.InvalidError{Field: "config.WaitTimeout", Reason: t.String() + " is not below the client's ReadTimeout " + read.String()}
	}
	return &waiter{n: cfg.WaitReplicas, timeout: t, aof: cfg.WaitAOF}, nil
}

// base returns the client the Store was given, without the wait.
func (s *Store) base() redis.UniversalClient {
	if wc, ok := s.c.(*waitClient); ok {
		return wc.UniversalClient
	}
	return s.c
}

// ReplicationError is the failure of a write whose replication could not
// be confirmed: the server ran it, but fewer replicas than
// Config.WaitReplicas acknowledged it within Config.WaitTimeout (or the
// wait itself failed). It matches stock.ErrUnknownOutcome: a failover may
// lose the write, so the caller retries with the same order ID.
type ReplicationError struct {
	// Acked is how many replicas acknowledged; Want is WaitReplicas.
	Acked, Want int64
	// Command is the wait that was sent: "WAIT" or "WAITAOF".
	Command string
	// Reason is why the wait gave no count, or "".
	Reason string
}

func (e *ReplicationError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("redisstock: %s after the write failed: %s", e.Command, e.Reason)
	}
	return fmt.Sprintf("redisstock: %s: %d of %d replicas acknowledged the write", e.Command, e.Acked, e.Want)
}

// Unwrap makes the error match stock.ErrUnknownOutcome (never a
// redis.Error: the write did run).
func (e *ReplicationError) Unwrap() error { return stock.ErrUnknownOutcome }

// one sends the command queue puts on a Pipeline, followed by the wait
// when it may write.
func one[C redis.Cmder](ctx context.Context, wc *waitClient, queue func(p redis.Pipeliner) C) C {
	p := wc.Pipeline()
	cmd := queue(p)
	_, _ = p.Exec(ctx)
	return cmd
}

// EvalSha runs the script followed by the wait, unless it only reads.
func (wc *waitClient) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, sha1, keys, args...) })
}

// Eval is EvalSha with the script's source (Script.Run's fallback).
func (wc *waitClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.Cmd { return p.Eval(ctx, script, keys, args...) })
}

// Do sends a command, followed by the wait when it may write.
func (wc *waitClient) Do(ctx context.Context, args ...any) *redis.Cmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.Cmd { return p.Do(ctx, args...) })
}

// Process sends cmd, followed by the wait when it may write.
func (wc *waitClient) Process(ctx context.Context, cmd redis.Cmder) error {
	p := wc.Pipeline()
	_ = p.Process(ctx, cmd)
	_, _ = p.Exec(ctx)
	return cmd.Err()
}

// Set is SET followed by the wait.
func (wc *waitClient) Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.StatusCmd { return p.Set(ctx, key, value, expiration) })
}

// SetArgs is SET with options followed by the wait.
func (wc *waitClient) SetArgs(ctx context.Context, key string, value any, a redis.SetArgs) *redis.StatusCmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.StatusCmd { return p.SetArgs(ctx, key, value, a) })
}

// SRem is SREM followed by the wait.
func (wc *waitClient) SRem(ctx context.Context, key string, members ...any) *redis.IntCmd {
	return one(ctx, wc, func(p redis.Pipeliner) *redis.IntCmd { return p.SRem(ctx, key, members...) })
}

// Pipeline returns a pipeline whose Exec adds the wait when it writes.
func (wc *waitClient) Pipeline() redis.Pipeliner {
	return &waitPipe{Pipeliner: wc.UniversalClient.Pipeline(), wc: wc}
}

// Pipelined runs fn on a Pipeline and executes it.
func (wc *waitClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return wc.Pipeline().Pipelined(ctx, fn)
}

// waitPipe queues commands in the client's own pipeline and sends them
// with the wait.
type waitPipe struct {
	redis.Pipeliner
	wc *waitClient
}

func (p *waitPipe) Pipeline() redis.Pipeliner   { return p }
func (p *waitPipe) TxPipeline() redis.Pipeliner { return p }

func (p *waitPipe) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if err := fn(p); err != nil {
		return nil, err
	}
	return p.Exec(ctx)
}

func (p *waitPipe) TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return p.Pipelined(ctx, fn)
}

// Exec sends the queued commands. When one of them writes they go, with
// the wait after them, in one pipeline on one connection: the client's
// server, or on a Cluster each master its commands' keys map to. When the
// wait falls short, every command that succeeded answers a
// *ReplicationError instead. Like Pipeline.Exec it returns the commands
// and the first error among them.
func (p *waitPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	cmds := append([]redis.Cmder(nil), p.Pipeliner.Cmds()...)
	if !writes(cmds) {
		return p.Pipeliner.Exec(ctx)
	}
	p.Pipeliner.Discard()
	if p.wc.cluster != nil {
		p.wc.execCluster(ctx, cmds)
	} else {
		p.wc.w.exec(ctx, p.wc.single, cmds)
	}
	return cmds, errOf(cmds)
}

// execCluster sends cmds to the masters of their first keys, each group
// with its wait, the groups in parallel (as a ClusterClient pipeline
// does). A group is sent to its master's client, which follows no
// redirection: a command that meets one answers it (MOVED, ASK: nothing
// ran) and the slot map is reloaded for the caller's retry.
func (wc *waitClient) execCluster(ctx context.Context, cmds []redis.Cmder) {
	var nodes []*redis.Client
	groups := map[*redis.Client][]redis.Cmder{}
	for _, c := range cmds {
		key, ok := firstKey(c)
		if !ok {
			setErr(cmds, fmt.Errorf("%s has no key to send its replication wait by", c.Name()))
			return
		}
		node, err := wc.cluster.MasterForKey(ctx, key)
		if err != nil {
			setErr(cmds, err)
			return
		}
		if _, ok := groups[node]; !ok {
			nodes = append(nodes, node)
		}
		groups[node] = append(groups[node], c)
	}
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Add(1)
		go func(node *redis.Client, g []redis.Cmder) {
			defer wg.Done()
			wc.w.exec(ctx, node, g)
		}(node, groups[node])
	}
	wg.Wait()
	for _, c := range cmds {
		if moved(c.Err()) {
			wc.cluster.ReloadState(ctx)
			return
		}
	}
}

// exec sends cmds in one pipeline on c, followed by the wait when they
// write, and checks the wait.
func (w *waiter) exec(ctx context.Context, c *redis.Client, cmds []redis.Cmder) {
	write := writes(cmds)
	if write && w.aof {
		if err := w.checkAOF(ctx, c); err != nil {
			setErr(cmds, err)
			return
		}
	}
	p := c.Pipeline()
	for _, cmd := range cmds {
		_ = p.Process(ctx, cmd)
	}
	if !write {
		_, _ = p.Exec(ctx)
		return
	}
	ms := w.timeout.Milliseconds()
	var acked func() (int64, error)
	if w.aof {
		cmd := p.Do(ctx, "WAITAOF", 0, w.n, ms)
		acked = func() (int64, error) {
			v, err := cmd.Int64Slice()
			if err == nil && len(v) != 2 {
				err = badReply(v)
			}
			if err != nil {
				return 0, err
			}
			return v[1], nil
		}
	} else {
		acked = p.Do(ctx, "WAIT", w.n, ms).Int64
	}
	_, _ = p.Exec(ctx)
	n, err := acked()
	if err == nil && n >= int64(w.n) {
		return
	}
	rerr := &ReplicationError{Acked: n, Want: int64(w.n), Command: "WAIT"}
	if w.aof {
		rerr.Command = "WAITAOF"
	}
	if err != nil {
		rerr.Acked, rerr.Reason = 0, err.Error()
		var serr redis.Error
		if w.aof && errors.As(err, &serr) {
			w.hasAOF.Delete(c.Options().Addr) // the server changed: check again
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err == nil || err == redis.Nil {
			cmd.SetErr(rerr)
		}
	}
}

// checkAOF makes sure c's server has WAITAOF before anything is sent to
// it: once per server (WAITAOF 0 0 0 answers at once). A server that
// refuses it fails the request with nothing sent (its reply is a
// redis.Error, so the failure is certain); the next request asks again.
// A network failure here is left to the request itself.
func (w *waiter) checkAOF(ctx context.Context, c *redis.Client) error {
	addr := c.Options().Addr
	if _, ok := w.hasAOF.Load(addr); ok {
		return nil
	}
	err := c.Do(ctx, "WAITAOF", 0, 0, 0).Err()
	var serr redis.Error
	switch {
	case err == nil:
		w.hasAOF.Store(addr, true)
		return nil
	case errors.As(err, &serr):
		return fmt.Errorf("Config.WaitAOF: the server at %s refused WAITAOF (it needs Redis 7.2 or later, or Valkey 8), nothing was sent: %w", addr, err)
	default:
		return nil
	}
}

// readCommands are the commands the Store sends that never write.
var readCommands = map[string]bool{
	"exists": true, "get": true, "hexists": true, "hget": true, "hmget": true, "hgetall": true,
	"sismember": true, "smismember": true, "smembers": true, "scard": true,
	"zrange": true, "zrangebyscore": true, "zscore": true, "zcard": true,
	"pttl": true, "ttl": true, "info": true, "evalsha_ro": true, "eval_ro": true,
	"lindex": true, "lrange": true, "time": true,
}

// readOnlyScripts holds the SHA1 of the scripts that never write.
var readOnlyScripts = map[string]bool{snapshotScript.Hash(): true, queuePeekScript.Hash(): true}

// writes reports whether any of cmds may write.
func writes(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		args := c.Args()
		switch name := strings.ToLower(c.Name()); name {
		case "evalsha", "eval":
			if len(args) < 2 {
				return true
			}
			src, _ := args[1].(string)
			if name == "eval" {
				src = scriptSHA(src)
			}
			if !readOnlyScripts[src] {
				return true
			}
		default:
			if !readCommands[name] {
				return true
			}
		}
	}
	return false
}

func scriptSHA(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// firstKey returns the key a command is routed by on a Cluster.
func firstKey(c redis.Cmder) (string, bool) {
	args := c.Args()
	pos := 1
	switch strings.ToLower(c.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 3 || fmt.Sprint(args[2]) == "0" {
			return "", false
		}
		pos = 3
	}
	if len(args) <= pos {
		return "", false
	}
	if p, ok := args[pos].(*string); ok && p != nil {
		return *p, true
	}
	return fmt.Sprint(args[pos]), true
}

// moved reports whether err is a Cluster's answer that the slot is served
// elsewhere (or not at all) now.
func moved(err error) bool {
	var serr redis.Error
	if !errors.As(err, &serr) {
		return false
	}
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "READONLY"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

func setErr(cmds []redis.Cmder, err error) {
	for _, c := range cmds {
		c.SetErr(err)
	}
}
