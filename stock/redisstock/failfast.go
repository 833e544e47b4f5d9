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
// o.Failover() for a *redis.Client, a *redis.ClusterClient or a Sentinel
// client. The values, against go-redis's defaults:
//
//   - DialTimeout 250ms (default 5s): a connect on a LAN, TLS included,
//     takes a few milliseconds, tens on a loaded machine; an address that
//     does not answer fails at this bound.
//   - DialerRetries 1 (default 5, 100ms apart): one connect per attempt. A
//     refused connect fails at once; four more 100ms apart only delay the
//     error.
//   - MaxRetries -1 (default 3, with backoff): a failed call is not sent
//     again by the client. The caller retries, with the same order ID,
//     which is what makes a retry safe.
//   - ReadTimeout 250ms (default 5s), which WriteTimeout follows when
//     unset: a script call of the gate runs in well under a millisecond, a
//     batch of MaxMaxBatch orders in a few, and tens of milliseconds on a
//     loaded machine with hundreds of callers; a server that accepts and
//     does not answer fails at this bound. Config.WaitTimeout then
//     defaults to half of it. Raise it where a call may stall longer
//     without the server being gone (a client throttled by its CPU quota,
//     a server forking for a snapshot): a call that runs out of it after
//     it was sent fails with stock.ErrUnknownOutcome.
//   - PoolTimeout 250ms (default ReadTimeout + 1s): a call waits this long
//     for a connection when PoolSize calls are in flight, then fails with
//     nothing sent.
//   - PipelinePoolSize -1 (default a second pool of 10): pipelines use the
//     main pool. With the second pool a pipeline that cannot get a
//     connection from it tries the main pool too, so a silent server costs
//     it two ReadTimeouts, and each pool logs its own failed dials.
//   - MaxRedirects 1, on a Cluster (default 3): a slot that moved is
//     followed once, and a node that fails is tried once more, after a
//     backoff of 10 to 30ms, instead of three times.
//
// Calls that move much data in one round trip ([Store.Snapshot] of many
// SKUs or of SKUs with tens of thousands of holds, [Store.Rebuild],
// [Store.Migrate]) can outlast these timeouts: run them on another Store, with the same Prefix, on a
// client with longer ones.
//
// go-redis logs "redis: connection pool: failed to dial after N attempts"
// through its process-wide logger whenever a connection pool fails to dial,
// whatever the client's options. After PoolSize such failures a pool
// stops dialing, and fails at once without logging until a background
// dial, once a second, succeeds. With these values a failed call dials
// once (on a Cluster twice), so a refused server logs a line or two per
// call until its pool stops dialing, at most PoolSize lines, then none
// until it is back. Only a
// process-wide logger silences those lines, which FailFast does not set;
// to drop them and keep go-redis's other lines on stderr:
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
