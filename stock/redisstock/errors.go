package redisstock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// outcomeError is an infrastructure failure after which a write may or may
// not have been applied. It matches stock.ErrUnknownOutcome, the underlying
// error and, when the caller's context ended, ctx.Err().
type outcomeError struct {
	err error
	ctx error // ctx.Err() when the context ended and err does not say so
}

func (e *outcomeError) Error() string {
	return "outcome unknown, retry with the same order ID: " + strings.TrimPrefix(e.err.Error(), "redisstock: ")
}

func (e *outcomeError) Unwrap() []error {
	if e.ctx != nil {
		return []error{stock.ErrUnknownOutcome, e.err, e.ctx}
	}
	return []error{stock.ErrUnknownOutcome, e.err}
}

// writeErr classifies the failure of a request that writes. A reply from
// the server (a redis.Error) means the request ran and refused, and a
// failure to get a connection means it was never sent: both are certain.
// Anything else (timeout, reset, EOF, canceled context), and a script that
// failed while it ran (it may have written before), leaves the outcome
// unknown.
func (s *Store) writeErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if layout1(err) {
		return &layoutError{prefix: s.prefix, layout: 1}
	}
	if certain(err) {
		return withCtx(ctx, failed(err))
	}
	return unknown(ctx, err)
}

// unknown is the outcomeError of err, which matches ctx.Err() too when the
// context has ended.
func unknown(ctx context.Context, err error) error {
	e := &outcomeError{err: err}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		e.ctx = cerr
	}
	return e
}

// readErr wraps the failure of a request that only reads.
func (s *Store) readErr(ctx context.Context, err error) error {
	if layout1(err) {
		return &layoutError{prefix: s.prefix, layout: 1}
	}
	return withCtx(ctx, failed(err))
}

// failed says, in a caller's terms, why a request that was not applied
// failed: the server refused it (a reply that is an error), or the gate
// could not reach the server. A context that ended says so by itself.
func failed(err error) error {
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr):
		return fmt.Errorf("redis refused the request: %w", err)
	case stock.IsCanceled(err):
		return err
	}
	return fmt.Errorf("redis unavailable: %w", err)
}

// callError is an infrastructure failure of a Store method, named by the
// call the caller made (and the order or SKU it was for), never by the
// step inside it that failed.
type callError struct {
	call, subject string // subject: an order ID or a SKU, or empty
	err           error
}

func (e *callError) Error() string {
	call := e.call
	if e.subject != "" {
		call += " " + strconv.Quote(e.subject)
	}
	return "redisstock: " + call + ": " + strings.TrimPrefix(e.err.Error(), "redisstock: ")
}

func (e *callError) Unwrap() error { return e.err }

// named names the call in *err, the error a Store method returns, unless
// it is a business outcome (stock.IsBusiness), which names what it refused
// itself. Each method defers it, with the call's subject as the caller
// gave it.
func named(err *error, call, subject string) {
	if *err != nil && !stock.IsBusiness(*err) {
		*err = &callError{call: call, subject: subject, err: *err}
	}
}

// notSent is the error of a call whose context ended before anything was
// sent.
func notSent(err error) error { return fmt.Errorf("not sent: %w", err) }

// layout1 reports whether err is a script's refusal of a state of key
// layout 1 (refuse_layout1 in stock_lib.lua), raised before it wrote (the
// server puts the script's location around the message).
func layout1(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "LAYOUT1 ")
}

// withCtx makes err match ctx.Err() too when the context has ended.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(err, cerr)
	}
	return err
}

// certain reports whether err proves the request was not applied: the
// server replied with an error, or the request never left the client.
func certain(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return !scriptFailed(rerr.Error())
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// scriptFailed reports whether msg is a script's error raised while it ran
// (a command inside it failed, or the script itself): Redis keeps what the
// script wrote before that point, so the outcome is not known. Redis marks
// such errors with the script's location (@user_script, since 6.0);
// miniredis with a Lua stack traceback.
func scriptFailed(msg string) bool {
	return strings.Contains(msg, "@user_script") || strings.Contains(msg, "stack traceback")
}

// firstErr returns the first error among cmds, skipping redis.Nil.
func firstErr(cmds ...redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil && err != redis.Nil {
			return err
		}
	}
	return nil
}

// errOf returns the first error among cmds (redis.Nil included).
func errOf[C redis.Cmder](cmds []C) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// isNoScript reports whether err is the server's answer to an EVALSHA of a
// script it does not have.
func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// pipelined runs the commands build queues in one round trip. Script.Run
// cannot fall back to EVAL inside a pipeline, so when the server lacks a
// script (a fresh or restarted server) the scripts the pipeline missed are
// loaded and the same commands are sent again: every command the Store
// pipelines is safe to repeat. A command that failed otherwise on one send
// may miss its script on the next (a Cluster node that did not answer, then
// did), so sending goes on while a send misses a script not loaded yet:
// once per script at most. build runs once. The caller checks each
// command's error.
func (s *Store) pipelined(ctx context.Context, build func(p redis.Pipeliner)) {
	p := s.c.Pipeline()
	build(p)
	cmds, _ := p.Exec(ctx)
	var loaded []*redis.Script
	for {
		missed := slices.DeleteFunc(missedScripts(cmds), func(sc *redis.Script) bool { return slices.Contains(loaded, sc) })
		if len(missed) == 0 || s.loadScripts(ctx, missed) != nil {
			return
		}
		loaded = append(loaded, missed...)
		p = s.c.Pipeline()
		for _, c := range cmds {
			_ = p.Process(ctx, c)
		}
		_, _ = p.Exec(ctx)
	}
}

// missedScripts returns the scripts of the EVALSHAs among cmds that the
// server answered NOSCRIPT, each once.
func missedScripts(cmds []redis.Cmder) []*redis.Script {
	var out []*redis.Script
	for _, c := range cmds {
		if !isNoScript(c.Err()) {
			continue
		}
		args := c.Args()
		if len(args) < 2 {
			continue
		}
		sha, _ := args[1].(string)
		sc := scriptsBySHA()[sha]
		if sc == nil || slices.Contains(out, sc) {
			continue
		}
		out = append(out, sc)
	}
	return out
}

// scriptsBySHA maps the SHA1 of each of the Store's scripts to the script.
var scriptsBySHA = sync.OnceValue(func() map[string]*redis.Script {
	m := make(map[string]*redis.Script, len(allScripts))
	for _, sc := range allScripts {
		m[sc.Hash()] = sc
	}
	return m
})

// loadScripts loads scripts on every server the client talks to: a
// ClusterClient's ScriptLoad reaches every master by itself, a Ring's
// shards are visited one by one.
func (s *Store) loadScripts(ctx context.Context, scripts []*redis.Script) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, sc := range scripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if ring, ok := s.c.(*redis.Ring); ok {
		return ring.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.c)
}

// allScripts are the Store's scripts; files that add scripts append theirs.
var allScripts = []*redis.Script{
	deductScript, confirmScript, releaseScript, reclaimScript, purgeScript,
	putScript, restockScript, adjustScript, dirReleaseScript, batchScript,
	snapshotScript, dirBindScript, dirKeepScript, deadlineScript,
}

// replyCode returns the leading status word of a script reply and the
// integer after it, if any.
func replyCode(res []any) (string, int64) {
	if len(res) == 0 {
		return "", 0
	}
	code, _ := res[0].(string)
	var n int64
	if len(res) > 1 {
		n, _ = res[1].(int64)
	}
	return code, n
}

// orderCodes are the scripts' refusals of a whole order.
var orderCodes = map[string]error{"unknown": stock.ErrUnknownOrder, "confirmed": stock.ErrOrderConfirmed,
	"closed": stock.ErrOrderClosed, "expired": stock.ErrHoldExpired}

// orderErr names the order in err.
func orderErr(id string, err error) error {
	return fmt.Errorf("redisstock: order %s: %w", strconv.Quote(id), err)
}

// badReply is the error of a reply the Store cannot read (a server that is
// not Redis, or keys under the prefix written by something else).
func badReply(res any) error {
	return fmt.Errorf("unexpected reply from redis: %v", res)
}

// lineErr turns a line script's failure code into the error for the line's
// SKU (a business error, or stock.ErrUnavailable for a SKU whose state the
// gate lost), or nil for an unknown code.
func lineErr(code, sku string) error {
	err, ok := lineCodes[code]
	if code == "need_user" {
		err = &stock.InvalidError{Field: "order.UserID", Reason: "empty, and the SKU has a per-user limit"}
	} else if !ok {
		return nil
	}
	return &stock.SKUError{SKU: sku, Err: err}
}

var lineCodes = map[string]error{"unknown_sku": stock.ErrUnknownSKU, "unavailable": stock.ErrUnavailable,
	"sold_out": stock.ErrSoldOut, "limit": stock.ErrLimitReached, "conflict": stock.ErrConflict,
	"expired": stock.ErrHoldExpired, "closed": stock.ErrOrderClosed, "unknown": stock.ErrUnknownOrder,
	"hold_too_long": stock.ErrHoldTooLong}
