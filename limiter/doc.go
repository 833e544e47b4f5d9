// Package limiter turns away excess traffic before it reaches the stock:
// per user, per SKU, per user and SKU, per IP, per device. It is usable from
// any Go HTTP stack and does not depend on the stock package.
//
// # Which limiter
//
//   - [Local]: keyed token buckets (golang.org/x/time/rate) in one process,
//     for the gateway layer and as the safety net of the others. Memory is
//     bounded by LocalConfig.MaxKeys, over all keys together: no key is
//     dropped while fewer are tracked; then idle keys are evicted one at a
//     time, least recently used (of a shard) first, never all at once
//     (which would let an abuser reset their own counter by flooding).
//     Keys are spread over sharded locks: no global lock on the hot path,
//     no allocation once a key is tracked.
//   - [Redis]: one key, shared by every node, in one script round trip.
//   - [Composite]: several dimensions in one script round trip,
//     all-or-nothing: a call that one dimension refuses counts nothing in
//     the others.
//
// Redis-backed limiters pick an [Algorithm]: [GCRA] (token bucket, as
// go-redis/redis_rate; the default), [FixedWindow] (the INCR + EXPIRE
// counter, except that refused calls are not counted) or [SlidingWindow]
// (a log: at most Rate in any window, no burst at a window edge). Every
// script reads Redis server TIME, so node clock skew plays no part.
//
// # Redis Cluster
//
// A Redis limiter's key is "<prefix>:<algorithm>:{<key>}": one slot per key.
// A Composite's keys must share a slot to be decided in one script: give
// Request.Tag (the user ID when every dimension is per user; a constant such
// as the sale ID when dimensions span users, which puts that limiter on one
// shard). Without a tag, a call whose keys span slots fails with
// [ErrCrossSlot] and counts nothing, unless CompositeConfig.AllowCrossSlot
// says the server is not a cluster (refused on a *redis.ClusterClient; a
// CROSSSLOT reply is ErrCrossSlot, never an outage for the Policy to
// decide). Calls are never split: splitting would lose all-or-nothing. A
// Composite's keys are
// "<prefix>:<algorithm>:{<tag>}:<dimension>:<value>" and, untagged,
// "<prefix>:<algorithm>:dim:{<dimension>:<value>}": never a Redis limiter's
// key, so a Redis limiter and a Composite may share a prefix.
//
// # Policy
//
// [Policy] adds an allowlist (Bypass), a choice of what to decide when Redis
// fails ([ReturnError], [FailOpen], [FailClosed]), an optional Fallback
// limiter (typically a [Local] with a tighter limit) that decides while
// Redis is down, and a Backoff during which a failed Redis is not called at
// all. Context cancellation is always returned as an error: a call on an
// ended context counts nothing and is never decided by the policy, whether
// Redis is called or skipped during the Backoff. A failure met while the
// call's context is live (a network error, a refused connection, an error
// reply other than CROSSSLOT) is a Redis failure at once: it starts the
// Backoff and reaches OnRedisError. A failure of a call whose context has
// ended (ctx.Err() set, or its deadline passed) is the caller's ending,
// whatever the client's error says: the call gets no decision, and an error
// matching the context's ending and the *RedisError it met. An ending by
// deadline is ambiguous (an impatient caller, or a Redis that does not
// answer): Policy.DeadlineFailures of them in a row (default 3), with no
// Redis reply in between, are a Redis failure; one is not, so a caller with
// a short deadline does not put the others into the Backoff. An ending by
// cancellation never is. go-redis's default client re-sends a call after a
// read timeout, waiting on the caller's context, so a paused Redis often
// ends calls with the context's error; a client built with
// redisstock.FailFast (MaxRetries -1, ReadTimeout 250ms) reports it at once
// to callers whose deadlines are longer.
//
// # Decisions and resets
//
// A [Decision] carries what go-redis/redis_rate's Result does: Allowed,
// Remaining (what the key could still admit now), RetryAfter (when a
// refused call could pass, if nothing else is counted) and ResetAfter (when
// the key is back to full capacity; for a Composite, the longest of the
// call's dimensions), enough for Retry-After and RateLimit headers. Redis
// limiters compute them on Redis server TIME, Local on its Clock.
//
// Reset ([Local.Reset], [Redis.Reset], [Composite.Reset]) clears a key's
// state, for support tooling and tests: its next call is decided as a
// fresh key's would be. A Fallback that is a [Resetter] (a [Local]) is
// cleared with it.
//
// # Errors
//
// Refusal is a [Decision] with Allowed false, never an error. Errors are
// invalid input ([ErrInvalid], *[InvalidError]), [ErrCrossSlot], and Redis
// failures (*[RedisError], matching [ErrUnavailable]), which the policy may
// turn into a degraded decision. Nothing in this package panics on input.
//
// # Lost replies
//
// A script's reply can be lost after Redis ran it (a dropped connection, a
// read timeout behind a busy server): the call's outcome is then unknown.
// The *RedisError it returns does not mean nothing was counted, and a
// degraded decision of the Policy may come on top of what the script
// counted. A client that re-sends the script itself (go-redis does after
// io.EOF or a read timeout, up to Options.MaxRetries; a ClusterClient
// may re-send once within MaxRedirects even with MaxRetries -1) runs it
// again: the first run counted the call's events and the second decides
// them again, so the caller may be refused events that were counted. A
// lost reply never admits past a limit; it can only count a caller's
// events twice. The limiter keeps no per-call record that would tell a
// re-send from a new call: that costs a key and a write per admitted call
// for as long as a re-send may come (half again the server time of a
// one-key GCRA call, and about 176 bytes per admitted call, measured),
// more than the extra refusal it would spare.
//
// Configuration structs mean their defaults when zero, except the limits.
// All limiters are safe for concurrent use.
package limiter
