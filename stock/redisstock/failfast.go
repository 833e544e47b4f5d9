package redisstock

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// FailFast fills the settings of o that are unset (zero) for a client on a
// checkout's hot path, and returns o (new options when o is nil): with the
// server refused, unreachable or silent, a call fails within tens of
// milliseconds instead of seconds, so callers are not held and the breaker
// of package degrade counts the failures while they happen. A field set
// before the call is kept. Build the client with
// redis.NewUniversalClient(o), or with o.Simple(), o.Cluster() or
// o.Failover(). The values, against go-redis's defaults:
//
//   - DialTimeout 250ms (default 5s): a connect on a LAN, TLS included,
//     takes a few milliseconds, tens on a loaded machine.
//   - DialerRetries 1 (default 5, 100ms apart): a refused connect fails at
//     once; four more only delay the error.
//   - MaxRetries -1 (default 3, with backoff): a failed call is not sent
//     again by the client; the caller retries, with the same order ID,
//     which is what makes a retry safe.
//   - ReadTimeout 250ms (default 5s), which WriteTimeout follows when
//     unset: a script call of the gate runs in well under a millisecond, a
//     batch of MaxMaxBatch orders in a few, and tens of milliseconds on a
//     loaded machine with hundreds of callers. Config.WaitTimeout then
//     defaults to half of it. Raise it where a call may stall longer
//     without the server being gone (a client throttled by its CPU quota,
//     a server forking for a snapshot): a call that runs out of it after
//     it was sent fails with stock.ErrUnknownOutcome.
//   - PoolTimeout 250ms (default ReadTimeout + 1s): the wait for a
//     connection when PoolSize calls are in flight, then a failure with
//     nothing sent.
//   - PipelinePoolSize -1 (default a second pool of 10): pipelines use the
//     main pool; with the second pool a silent server costs a pipeline two
//     ReadTimeouts, and each pool logs its own failed dials.
//   - MaxRedirects 1, on a Cluster (default 3): a slot that moved is
//     followed once, and a node that fails is tried once more.
//
// Calls that move much data in one round trip ([Store.Snapshot] of many
// SKUs or of SKUs with tens of thousands of holds, [Store.Rebuild],
// [Store.Migrate]) can outlast these timeouts: run them on another Store,
// with the same Prefix, on a client with longer ones.
//
// go-redis logs "redis: connection pool: failed to dial after N attempts"
// through its process-wide logger whenever a pool fails to dial: with
// these values a refused server logs a line or two per call, at most
// PoolSize lines until the pool stops dialing, then none until it is back.
// FailFast sets no logger; to drop those lines and keep go-redis's others:
//
//	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
//
// with package github.com/redis/go-redis/v9/logging.
func FailFast(o *redis.UniversalOptions) *redis.UniversalOptions {
	if o == nil {
		o = new(redis.UniversalOptions)
	}
	const bound = 250 * time.Millisecond
	fill(&o.DialTimeout, bound)
	fill(&o.DialerRetries, 1)
	fill(&o.MaxRetries, -1)
	fill(&o.ReadTimeout, bound)
	fill(&o.PoolTimeout, bound)
	fill(&o.PipelinePoolSize, -1)
	fill(&o.MaxRedirects, 1)
	return o
}

// fill sets *f to v when it is zero.
func fill[T int | time.Duration](f *T, v T) {
	if *f == 0 {
		*f = v
	}
}
