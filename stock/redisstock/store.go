package redisstock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Config configures a Store. The zero value means defaults.
type Config struct {
	// Prefix starts every key the Store writes; default "sg". It must pass
	// stock.ValidateID. Stores with different prefixes share nothing.
	Prefix string
	// Clock gives the time deadlines are computed from and compared with;
	// default stock.SystemClock.
	Clock stock.Clock
	// Retention is how long an order's line records and directory entry
	// are read once the order ends, so that retries with the same order ID
	// stay idempotent (see Key layout in the package doc); default 24h, at
	// least MinRetention.
	Retention time.Duration
	// MaxBatch is the most concurrent Deducts sent together in one script
	// call (see "Deduct: one script call, shared" in the package doc);
	// default DefaultMaxBatch, at most MaxMaxBatch. 1 sends every Deduct on
	// its own. A Ring does not batch.
	MaxBatch int

	// WaitReplicas, when above 0, makes every call that writes wait, before
	// it answers, until that many replicas acknowledged its writes; when
	// fewer do within WaitTimeout, the call fails with a *ReplicationError
	// (stock.ErrUnknownOutcome). Default 0: no wait. At most
	// MaxWaitReplicas. It needs a *redis.Client (standalone or Sentinel) or
	// a *redis.ClusterClient (New refuses it on any other client with
	// stock.ErrInvalid). See "Replication wait" in the package doc.
	WaitReplicas int
	// WaitTimeout bounds each wait; default DefaultWaitTimeout (1s), or
	// half the client's ReadTimeout when that is shorter. It must be at
	// least a millisecond and below the client's ReadTimeout (the wait's
	// reply is read under it). Ignored when WaitReplicas is 0.
	WaitTimeout time.Duration
	// WaitAOF waits with WAITAOF 0 <WaitReplicas> <ms> instead of WAIT
	// (see "Replication wait" in the package doc). It needs WaitReplicas
	// above 0.
	WaitAOF bool

	// Observer receives the Store's calls, batches and reclaim passes
	// (package observe); the zero value reports nothing.
	Observer observe.Observer
}

// DefaultMaxBatch is the MaxBatch of a Config that does not set one.
const DefaultMaxBatch = 64

// MaxMaxBatch is the largest MaxBatch a Config may set.
const MaxMaxBatch = 256

// DefaultRetention is the Retention of a Config that does not set one.
const DefaultRetention = 24 * time.Hour

// MinRetention is the shortest Retention New accepts: a retry must find the
// records it is meant to find.
const MinRetention = time.Second

// Store is the Redis+Lua stock.Manager, stock.Reclaimer,
// stock.OrderReader, stock.PartialReverter, stock.HoldReverter and
// stock.HoldExtender. It is safe for concurrent use.
type Store struct {
	c       redis.UniversalClient
	prefix  string
	clock   stock.Clock
	keep    time.Duration
	cluster bool          // keys may live on several servers: single-slot scripts only
	perSKU  bool          // shards are not hash slots (a Ring): one group per SKU
	batch   *batcher      // nil: one script call per Deduct
	slots   *slotBatchers // on a Redis Cluster; nil: one script call per Deduct
	// gens caches, on the slot-by-slot path (a Cluster, a Ring), the
	// generation of each SKU's state last seen: a Deduct's take refuses a
	// state of another generation than the one its attempt read before it
	// bound the order ID (see stateGens).
	gens sync.Map // SKU -> gen
	// listed is set once this Store put a SKU on sale (or rebuilt one): a
	// registry missing after that means Redis lost its data, not a new gate.
	listed atomic.Bool
	obs    *observe.Observer
	// bucketed is set on a Redis Cluster, where a SKU may be split into
	// buckets on several slots; bk caches the SKUs' bucket counts.
	bucketed   bool
	bk         sync.Map // SKU -> *buckets: the bucket counts this Store read
	countReads sync.Map // SKU -> true: a read of its stale count runs here
	flights    sync.Map // SKU -> *flight: the refill of the SKU running here
	// dir is the order directory's layout; layout is set once the prefix
	// is known to hold this layout (and dir its count of shards).
	dir    atomic.Pointer[directory]
	layout atomic.Bool
}

var (
	_ stock.Manager   = (*Store)(nil)
	_ stock.Reclaimer = (*Store)(nil)
)

// The scripts, loaded once per process; see the headers in package lua.
var (
	deductScript  = redis.NewScript(lua.Script("stock_deduct.lua"))
	confirmScript = redis.NewScript(lua.Script("stock_confirm.lua"))
	releaseScript = redis.NewScript(lua.Script("stock_release.lua"))
	reclaimScript = redis.NewScript(lua.Script("stock_reclaim.lua"))
	purgeScript   = redis.NewScript(lua.Script("stock_purge.lua"))
	putScript     = redis.NewScript(lua.Script("stock_put.lua"))
	restockScript = redis.NewScript(lua.Script("stock_restock.lua"))
	// restockUnbindScript frees a restock operation ID; see its header.
	restockUnbindScript = redis.NewScript(lua.Script("stock_restock_unbind.lua"))
	adjustScript        = redis.NewScript(lua.Script("stock_adjust.lua"))
	dirReleaseScript    = redis.NewScript(lua.Script("stock_dir_release.lua"))
	batchScript         = redis.NewScript(batchSource)
)

// New returns a Store on c. It does no I/O. It fails with stock.ErrInvalid
// for a bad Prefix, a Retention below MinRetention, a MaxBatch outside
// [0, MaxMaxBatch], or a replication wait (WaitReplicas, WaitTimeout,
// WaitAOF) that is out of range or cannot be done on c.
func New(c redis.UniversalClient, cfg Config) (*Store, error) {
	if c == nil {
		return nil, &stock.InvalidError{Field: "client", Reason: "nil"}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "sg"
	}
	if err := stock.ValidateID("config.Prefix", cfg.Prefix); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	if cfg.Retention < 0 || (cfg.Retention > 0 && cfg.Retention < MinRetention) {
		return nil, &stock.InvalidError{Field: "config.Retention", Reason: cfg.Retention.String() + " is below " + MinRetention.String()}
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxBatch < 0 || cfg.MaxBatch > MaxMaxBatch {
		return nil, &stock.InvalidError{Field: "config.MaxBatch", Reason: strconv.Itoa(cfg.MaxBatch) + " is outside [0, " + strconv.Itoa(MaxMaxBatch) + "]"}
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	wait, err := checkWait(c, cfg)
	if err != nil {
		return nil, err
	}
	// Only a *redis.Client (standalone, or Sentinel through
	// NewFailoverClient) keeps every key on one server. A ClusterClient, a
	// Ring or any other UniversalClient may shard, so they take the
	// single-slot path.
	_, single := c.(*redis.Client)
	_, slotted := c.(*redis.ClusterClient)
	cluster := !single
	s := &Store{c: c, prefix: cfg.Prefix, clock: cfg.Clock, keep: cfg.Retention, cluster: cluster, perSKU: cluster && !slotted, obs: &cfg.Observer, bucketed: slotted}
	if cluster {
		s.dir.Store(newDirectory(s.prefix, maxDirShards))
	} else {
		s.dir.Store(newDirectory(s.prefix, 1))
	}
	switch {
	case cfg.MaxBatch <= 1:
	case !cluster:
		s.batch = &batcher{s: s, max: cfg.MaxBatch, run: s.deductBatch}
	case slotted:
		s.slots = &slotBatchers{max: cfg.MaxBatch}
		s.slots.binds = &batcher{s: s, max: cfg.MaxBatch, run: s.bindBatch, quiet: true}
	}
	if wait != nil {
		wc := &waitClient{UniversalClient: c, w: wait}
		wc.single, _ = c.(*redis.Client)
		wc.cluster, _ = c.(*redis.ClusterClient)
		s.c = wc
	}
	return s, nil
}

// The key layout, described in doc.go. A SKU's keys are prefix + ":{" +
// sku + "}" + one of these suffixes; writeSKUKey and dirKeys are the one
// place they are spelled.
const (
	stateSuffix = ":state"
	holdsSuffix = ":holds"
	usersSuffix = ":users"
	linesSuffix = ":lines"
	goneSuffix  = ":gone"
	queueSuffix = ":hq"
)

// writeSKUKey writes the key of sku with suffix, then tail, to b.
func (s *Store) writeSKUKey(b *strings.Builder, sku, suffix, tail string) {
	b.WriteString(s.prefix)
	b.WriteString(":{")
	b.WriteString(sku)
	b.WriteByte('}')
	b.WriteString(suffix)
	b.WriteString(tail)
}

// keyLen is an upper bound of the length of a key of sku with a suffix
// and tail of n bytes.
func (s *Store) keyLen(sku string, n int) int { return len(s.prefix) + len(":{}") + len(sku) + n }

func (s *Store) skuKey(sku, suffix, tail string) string {
	var b strings.Builder
	b.Grow(s.keyLen(sku, len(suffix)+len(tail)))
	s.writeSKUKey(&b, sku, suffix, tail)
	return b.String()
}

func (s *Store) stateKey(sku string) string { return s.skuKey(sku, stateSuffix, "") }
func (s *Store) holdsKey(sku string) string { return s.skuKey(sku, holdsSuffix, "") }
func (s *Store) usersKey(sku string) string { return s.skuKey(sku, usersSuffix, "") }
func (s *Store) linesKey(sku string) string { return s.skuKey(sku, linesSuffix, "") }
func (s *Store) goneKey(sku string) string  { return s.skuKey(sku, goneSuffix, "") }
func (s *Store) queueKey(sku string) string { return s.skuKey(sku, queueSuffix, "") }

func (s *Store) registryKey() string        { return s.prefix + ":skus" }
func (s *Store) claimKey(sku string) string { return s.skuKey(sku, ":rb", "") }

// dealKeys appends the four keys a Deduct's line needs for sku (state,
// holds, users, lines).
func (s *Store) dealKeys(keys []string, sku string) []string {
	return append(keys, s.stateKey(sku), s.holdsKey(sku), s.usersKey(sku), s.linesKey(sku))
}

func (s *Store) nowMs() int64 { return s.clock.Now().UnixMilli() }

// Retention returns how long the Store reads a finished order's records
// and keeps a restock operation's marker (Config.Retention, defaults
// resolved).
func (s *Store) Retention() time.Duration { return s.keep }

// PutOnSale overwrites the SKU's available units and sets its per-user
// limit, hold time and maximum hold time; units held and sold are kept. A SKU that has no state gets
// a new one with a new Fence generation. A context already done returns its
// error with nothing sent.
func (s *Store) PutOnSale(ctx context.Context, l stock.Listing) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpPutOnSale, 1)
	defer func() { tr.Done(err) }()
	defer named(&err, "put on sale SKU", l.SKU)
	if err := l.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	if done, err := s.putBuckets(ctx, l); done || err != nil {
		return err
	}
	return s.putStates(ctx, []stock.Listing{l})
}

// The keys of a restock operation: the operation ID's binding to its SKU
// and units (one per Store), and its marker on the SKU (the SKU's slot).
func (s *Store) opKey(op string) string            { return s.prefix + ":restock:{" + op + "}" }
func (s *Store) opMarkerKey(sku, op string) string { return s.skuKey(sku, ":rs:", op) }

// Restock adds r.Units to a SKU on sale, once per r.OpID. It first binds
// the operation ID to its SKU and units (another SKU or count under a bound
// ID is stock.ErrConflict), then adds the units and sets the operation's
// marker on the SKU in one script; both live for the Store's Retention, so
// any repeat within it (a go-redis retry after a read timeout, the caller's
// retry after stock.ErrUnknownOutcome, a reconciler completing a restock
// the record has) returns nil and adds nothing. A restock counted by a
// [Store.Rebuild] (listed in its Ops) is a repeat too.
//
// It fails with stock.ErrInvalid if the SKU would have more than
// stock.MaxUnits available, with stock.ErrUnknownSKU if the SKU was never
// put on sale, and with stock.ErrUnavailable if the SKU's state is missing
// though the Store's registry says it was put on sale (or the registry is
// gone too): the gate lost its data and is not rebuilt yet. A refused
// restock frees the operation ID again. A context already done returns its
// error with nothing sent.
func (s *Store) Restock(ctx context.Context, r stock.Restock) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpRestock, 1)
	defer func() { tr.Done(err) }()
	defer named(&err, "restock SKU", r.SKU)
	if err := r.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	bind := r.SKU + "\n" + strconv.FormatInt(r.Units, 10)
	prev, err := s.c.SetArgs(ctx, s.opKey(r.OpID), bind, redis.SetArgs{Mode: "NX", Get: true, TTL: s.keep}).Result()
	switch {
	case err == redis.Nil:
		prev = "" // bound now
	case err != nil:
		return s.writeErr(ctx, err)
	case prev != bind:
		return &stock.SKUError{SKU: r.SKU, Err: fmt.Errorf("%w: restock operation %q was used for other units or another SKU", stock.ErrConflict, r.OpID)}
	}
	res, err := restockScript.Run(ctx, s.c, []string{s.stateKey(r.SKU), s.opMarkerKey(r.SKU, r.OpID)},
		r.Units, int64(stock.MaxUnits), s.keep.Milliseconds()).Slice()
	if err != nil {
		return s.writeErr(ctx, err)
	}
	var refusal error
	code, n := replyCode(res)
	switch code {
	case "ok", "dup":
		return nil
	case "conflict":
		return &stock.SKUError{SKU: r.SKU, Err: fmt.Errorf("%w: restock operation %q was applied with other units", stock.ErrConflict, r.OpID)}
	case "unknown_sku":
		refusal = s.missingErr(ctx, r.SKU)
	case "too_many":
		refusal = &stock.InvalidError{Field: "units", Reason: "SKU " + strconv.Quote(r.SKU) + " has " + strconv.FormatInt(n, 10) +
			" units; it would have more than " + strconv.FormatInt(stock.MaxUnits, 10)}
	default:
		return badReply(res)
	}
	if prev == "" {
		// Nothing was added: free the ID this call bound. If this fails the
		// binding stays (a retry with the same r still works).
		_ = restockUnbindScript.Run(ctx, s.c, []string{s.opKey(r.OpID)}, bind).Err()
	}
	return refusal
}

// missingErr classifies a SKU whose state a script found missing: a gate
// that lost its data (stock.ErrUnavailable) if the Store's registry has the
// SKU, or is gone though this Store put SKUs on sale; otherwise an unknown
// SKU (a Redis that lost everything and a new one look the same to a Store
// that never wrote to it).
func (s *Store) missingErr(ctx context.Context, sku string) error {
	reg, err := s.readRegistry(ctx, sku)
	if err != nil {
		return s.readErr(ctx, err)
	}
	if !reg.member && !reg.lost && (reg.exists || !s.listed.Load()) {
		return &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	}
	return &lostError{sku: sku}
}

// lostError is stock.ErrUnavailable for a gate state (a SKU's, or one of
// its buckets') that Redis lost. Its message names the SKU.
type lostError struct{ sku string }

func (e *lostError) Error() string {
	return "redisstock: SKU " + strconv.Quote(skuOf(e.sku)) + ": " + stock.ErrUnavailable.Error() + ": its state is gone (Redis lost its data)"
}

// Unwrap returns stock.ErrUnavailable.
func (e *lostError) Unwrap() error { return stock.ErrUnavailable }

// Available returns the SKU's units that can be deducted now, in one read.
func (s *Store) Available(ctx context.Context, sku string) (_ int64, err error) {
	defer named(&err, "read available units of SKU", sku)
	l, err := s.levels(ctx, sku)
	return l.Available, err
}

// Levels returns the SKU's available, held and sold units and settings, in
// one read.
func (s *Store) Levels(ctx context.Context, sku string) (_ stock.Levels, err error) {
	defer named(&err, "read levels of SKU", sku)
	return s.levels(ctx, sku)
}

func (s *Store) levels(ctx context.Context, sku string) (stock.Levels, error) {
	if err := stock.ValidateID("sku", sku); err != nil {
		return stock.Levels{}, err
	}
	if err := s.ready(ctx); err != nil {
		return stock.Levels{}, err
	}
	var st SKUState
	if b, err := s.splitSKU(ctx, sku); err != nil {
		return stock.Levels{}, err
	} else if b != nil {
		if st, err = s.bucketLevels(ctx, b); err != nil {
			return stock.Levels{}, err
		}
	} else {
		vals, err := s.c.HMGet(ctx, s.stateKey(sku), stateFields...).Result()
		if err != nil {
			return stock.Levels{}, s.readErr(ctx, err)
		}
		if st, err = parseState(sku, vals); err != nil {
			return stock.Levels{}, err
		}
	}
	if !st.Exists {
		return stock.Levels{}, &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	}
	return st.Levels, nil
}

// randomToken returns 16 random bytes in hex: a lease's, an Adjust's or a
// reclaim pass's token, or a state's generation (a Fence's Gen).
func randomToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// attemptToken returns the random part of a Deduct attempt's token: 12
// random bytes in unpadded URL-safe base64, 16 characters, none of them a
// separator of the records and entries that carry it (tab, newline,
// comma, colon, dot). It is stored with every hold on a Cluster and in its
// order's directory entry, so it is shorter than randomToken's.
func attemptToken() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
