package redisstock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

// The scripts that move units between the buckets of a SKU; see their
// headers in package lua.
var (
	bucketLeaseScript = redis.NewScript(lua.Script("stock_bucket_lease.lua"))
	bucketOutScript   = redis.NewScript(lua.Script("stock_bucket_out.lua"))
	bucketInScript    = redis.NewScript(lua.Script("stock_bucket_in.lua"))
	bucketClearScript = redis.NewScript(lua.Script("stock_bucket_clear.lua"))
)

func init() {
	allScripts = append(allScripts, bucketLeaseScript, bucketOutScript, bucketInScript, bucketClearScript)
}

// bucketSep separates a SKU from the rest of the name of one of its
// buckets: a space, which stock.ValidateID refuses inside a SKU, so a
// bucket's name never collides with a SKU's and names its SKU.
const bucketSep = ' '

// Key suffixes of the bucket machinery (see doc.go).
const (
	leaseSuffix = ":bl"  // the SKU's transfer lease, on its first bucket
	outSuffix   = ":xo"  // a bucket's departure records
	inSuffix    = ":xi:" // a bucket's arrival markers, + transfer ID
)

// bucketLease is how long a transfer lease lives: far longer than the few
// round trips a refill takes, short enough that a refill whose process
// died holds nobody up for long.
const bucketLease = 2 * time.Second

// bucketCacheTTL is how long a Store trusts what it read of a SKU's bucket
// count; a count never changes while the SKU lives (see putBuckets).
const bucketCacheTTL = time.Second

// skuOf returns the SKU a gate state's name belongs to: name itself, or
// the SKU part of a bucket's name.
func skuOf(name string) string {
	if i := strings.IndexByte(name, bucketSep); i >= 0 {
		return name[:i]
	}
	return name
}

// skusOf returns the SKU of each of xs.
func skusOf[T any](xs []T, sku func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = sku(x)
	}
	return out
}

// bucketNames returns the names of the n buckets of sku (see Buckets in
// the package doc).
func bucketNames(sku string, n int) []string {
	names := make([]string, n)
	names[0] = sku
	if n == 1 {
		return names
	}
	firsts := slotRanges(n)
	own := rangeOf(firsts, sku)
	for i := 1; i < n; i++ {
		names[i] = nameIn(sku+string(bucketSep)+strconv.Itoa(i)+".", firsts, (own+i)%n)
	}
	return names
}

// rangeOf is the slot range (of those starting at firsts) of name's slot.
func rangeOf(firsts []int, name string) int {
	r, _ := slices.BinarySearch(firsts, keyslot.Slot(name)+1)
	return r - 1
}

// nameIn returns prefix and the smallest k whose slot is in range r.
func nameIn(prefix string, firsts []int, r int) string {
	for k := 0; ; k++ {
		if name := prefix + strconv.Itoa(k); rangeOf(firsts, name) == r {
			return name
		}
	}
}

// slotRanges returns the first slot of each of the n ranges redis-cli
// --cluster create gives n masters (its rounding, in its float
// arithmetic): for 3, slots 0-5460, 5461-10922 and 10923-16383.
func slotRanges(n int) []int {
	firsts := make([]int, n)
	per := float32(16384) / float32(n)
	var cursor float32
	first := 0
	for i := range n {
		firsts[i] = first
		last := int(math.Round(float64(cursor + per - 1)))
		if i == n-1 || last > 16383 {
			last = 16383
		}
		first = max(last, first) + 1
		cursor += per
	}
	return firsts
}

// buckets is what a Store knows of one SKU's buckets.
type buckets struct {
	names []string // names[0] is the SKU
	read  time.Time
}

// home returns the bucket an order of user (or, without one, of the order
// ID) goes to: always the same one for a user, so the user's count for the
// SKU lives in one bucket and the per-user limit is checked in one script.
func (b *buckets) home(user, id string) int {
	if len(b.names) == 1 {
		return 0
	}
	h := fnv.New32a()
	if user != "" {
		h.Write([]byte(user))
	} else {
		h.Write([]byte(id))
	}
	return int(h.Sum32() % uint32(len(b.names)))
}

// index returns the bucket number of a state's name, or -1.
func (b *buckets) index(name string) int { return slices.Index(b.names, name) }

// bucketsOf returns the buckets of each SKU: from the cache, or read from
// the SKUs' first states (field bk) in one round trip for those it lacks.
// A SKU with no state, or a Store without hash slots, has one bucket.
// A count past the cache's lifetime is read again by one Deduct of this
// process at a time; while that read runs, the others go by the count
// they had (a read per Deduct, on a server slowed down past the cache's
// lifetime, would keep every count stale and the server slower still).
// Nobody waits for another's read: it may be slow, or held up.
func (s *Store) bucketsOf(ctx context.Context, skus []string) ([]*buckets, error) {
	out := make([]*buckets, len(skus))
	if !s.bucketed {
		for i, sku := range skus {
			out[i] = &buckets{names: []string{sku}}
		}
		return out, nil
	}
	now := time.Now()
	var read, refresh []int
	for i, sku := range skus {
		v, ok := s.bk.Load(sku)
		switch {
		case !ok:
			read = append(read, i)
		case now.Sub(v.(*buckets).read) < bucketCacheTTL:
			out[i] = v.(*buckets)
		case s.refreshing(sku):
			out[i] = v.(*buckets) // another Deduct reads it now
		default:
			read, refresh = append(read, i), append(refresh, i)
		}
	}
	if len(read) == 0 {
		return out, nil
	}
	got, err := s.readCounts(ctx, skus, read)
	for _, i := range refresh {
		s.countReads.Delete(skus[i])
	}
	if err != nil {
		return nil, err
	}
	for _, i := range read {
		out[i] = got[skus[i]]
	}
	return out, nil
}

// refreshing reports whether a read of sku's bucket count runs in this
// process, and if none does, marks one as running (the caller's).
func (s *Store) refreshing(sku string) bool {
	_, busy := s.countReads.LoadOrStore(sku, true)
	return busy
}

// readCounts reads the bucket counts of the SKUs skus[i] for each i of
// which, in one round trip, and caches those of SKUs that have a state.
func (s *Store) readCounts(ctx context.Context, skus []string, which []int) (map[string]*buckets, error) {
	now := time.Now()
	cmds := make([]*redis.SliceCmd, len(which))
	kept := make([]*redis.StringCmd, len(which))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k, i := range which {
			cmds[k] = p.HMGet(ctx, s.stateKey(skus[i]), "bk", "hold")
			kept[k] = p.HGet(ctx, s.countsKey(), skus[i])
		}
	})
	got := make(map[string]*buckets, len(which))
	for k, i := range which {
		v, err := cmds[k].Result()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		count, _ := v[0].(string)
		if count == "" {
			// No count in the first state (it is gone, or a rebuild
			// stopped before writing it): the counts hash beside the
			// registry says whether the SKU is split.
			if count, err = kept[k].Result(); err != nil && err != redis.Nil {
				return nil, s.readErr(ctx, err)
			}
		}
		n := 1
		if count != "" {
			if n, err = strconv.Atoi(count); err != nil || n < 1 || n > stock.MaxBuckets {
				return nil, badReply(v)
			}
		}
		b := &buckets{names: bucketNames(skus[i], n), read: now}
		if v[1] != nil {
			s.bk.Store(skus[i], b) // a SKU without state is read again next time
		}
		got[skus[i]] = b
	}
	return got, nil
}

// setCount writes the bucket count into bucket i's state (a pipeline of
// one, so that a replication wait covers it).
func (s *Store) setCount(ctx context.Context, b *buckets, i int) error {
	var cmd *redis.IntCmd
	s.pipelined(ctx, func(p redis.Pipeliner) { cmd = p.HSet(ctx, s.stateKey(b.names[i]), "bk", len(b.names)) })
	return s.writeErr(ctx, cmd.Err())
}

// countsKey is the hash of the bucket counts of the SKUs split into
// buckets: what rebuilds and reads go by once a SKU's first state is lost.
func (s *Store) countsKey() string { return s.prefix + ":buckets" }

// forget drops what the Store knows of the SKU's buckets.
func (s *Store) forget(sku string) { s.bk.Delete(sku) }

// route returns the order's items with each bucketed SKU replaced by the
// bucket the order goes to, sorted, and the buckets of each routed line
// (nil for a SKU of one bucket).
func (s *Store) route(ctx context.Context, o stock.Order, items []stock.Item) ([]stock.Item, []*buckets, error) {
	skus := skusOf(items, func(it stock.Item) string { return it.SKU })
	bs, err := s.bucketsOf(ctx, skus)
	if err != nil {
		return nil, nil, err
	}
	routed := slices.Clone(items)
	for i := range routed {
		routed[i].SKU = bs[i].names[bs[i].home(o.UserID, o.ID)]
	}
	routed = canon.Sorted(routed)
	of := make([]*buckets, len(routed))
	for i, it := range routed {
		for j := range items {
			if items[j].SKU == skuOf(it.SKU) && len(bs[j].names) > 1 {
				of[i] = bs[j]
			}
		}
	}
	return routed, of, nil
}

// deductBuckets is Deduct on a Redis Cluster for an order some of whose
// SKUs are split into buckets (see Buckets in the package doc). The route
// follows the bucket count the Store reads, which a lost and restored
// count can change between two Deducts of one order: a Deduct whose ID is
// bound to the order's own items routed to other buckets (stock.ErrConflict
// for its own route) is a repeat, sent again on the bound route.
func (s *Store) deductBuckets(ctx context.Context, o stock.Order, items []stock.Item) error {
	err := s.deductRouted(ctx, o, items)
	if !errors.Is(err, stock.ErrConflict) {
		return err
	}
	ident, groups, lerr := s.lookup(ctx, o.ID)
	if lerr != nil {
		return err
	}
	var bound []stock.Item
	for _, g := range groups {
		bound = append(bound, g...)
	}
	own := make([]stock.Item, len(bound))
	for i, it := range bound {
		own[i] = stock.Item{SKU: skuOf(it.SKU), Qty: it.Qty}
	}
	if ident != o.UserID+"\n"+canon.Signature(canon.Sorted(bound)) ||
		canon.Signature(canon.Sorted(own)) != canon.Signature(items) {
		return err // another order's items
	}
	ro := o
	ro.Items = canon.Sorted(bound)
	return publicErr(s.deductSlots(ctx, ro, ident, ro.Items))
}

// deductRouted is deductBuckets on the route the Store reads.
func (s *Store) deductRouted(ctx context.Context, o stock.Order, items []stock.Item) error {
	if s.unsplit(items) {
		return s.deductSlots(ctx, o, o.UserID+"\n"+canon.Signature(items), items)
	}
	refreshed := false
	refills := 0
	for {
		if refills == maxRefills {
			return fmt.Errorf("%w: the units refills brought to its bucket were taken by other orders %d times",
				stock.ErrContention, maxRefills)
		}
		routed, of, err := s.route(ctx, o, items)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(of, func(b *buckets) bool { return b != nil }) {
			return s.deductSlots(ctx, o, o.UserID+"\n"+canon.Signature(items), items)
		}
		ro := o
		ro.Items = routed
		err = s.deductSlots(ctx, ro, o.UserID+"\n"+canon.Signature(routed), routed)
		if err == nil {
			return nil
		}
		var name string
		var se *stock.SKUError
		var le *lostError
		switch {
		case errors.As(err, &se):
			name = se.SKU
		case errors.As(err, &le):
			name = le.sku
		default:
			return err
		}
		line := slices.IndexFunc(routed, func(it stock.Item) bool { return it.SKU == name })
		if line < 0 || of[line] == nil {
			return publicErr(err)
		}
		b := of[line]
		switch {
		case errors.Is(err, stock.ErrSoldOut):
			short, led, rerr := s.refillShared(ctx, b, b.index(name), routed[line].Qty)
			if rerr != nil {
				return rerr
			}
			if short {
				return publicErr(err)
			}
			if led {
				refills++
			}
		case errors.Is(err, stock.ErrUnknownSKU), errors.Is(err, stock.ErrUnavailable):
			// The bucket has no state: the count changed since this Store
			// read it, or the bucket's master lost its data while the
			// SKU's first state lives. Read the count again, and give a
			// lost bucket an empty state (its units are counted back by a
			// reconciler).
			if refreshed {
				return publicErr(err)
			}
			refreshed = true
			s.forget(skuOf(name))
			if i := b.index(name); i > 0 {
				if rerr := s.restoreBucket(ctx, b, i); rerr != nil {
					return rerr
				}
			}
		default:
			return publicErr(err)
		}
	}
}

// maxRefills bounds the refills one Deduct runs itself: each moved units
// to its bucket that other orders took before it could.
const maxRefills = 32

// flight is a refill of a SKU under way in this process, to bucket home.
// want is the units it brings there: its own order's line and those of
// the Deducts of the same bucket that wait for it, so that one refill
// serves every buyer waiting, not one. moved is when it last got a reply
// from Redis (unix ns). Once done is closed, short says whether it found
// the SKU sold out: soldTotal units available in every bucket, read from
// soldFrom on.
type flight struct {
	done      chan struct{}
	home      int
	want      atomic.Int64
	moved     atomic.Int64
	short     bool
	soldTotal int64
	soldFrom  time.Time
}

// step records that the refill got a reply: it is slow, perhaps, but not
// stalled.
func (f *flight) step() { f.moved.Store(time.Now().UnixNano()) }

// stalled reports whether the refill got no reply for a lease's lifetime.
func (f *flight) stalled() bool {
	return time.Since(time.Unix(0, f.moved.Load())) >= bucketLease
}

// refillShared is refill, shared by the Deducts of one process: while a
// refill of the SKU runs here, another Deduct that needs one waits for it
// to end. If that refill proved the SKU had fewer than this line's units
// at an instant after this Deduct began waiting, the line is sold out
// (short) then too; otherwise it reports neither short nor led, to try its
// order again (the refill may have brought it units). So a sale's last
// units do not send every buyer of a node to the lease, and once it is
// sold out one refill answers them all. A refill that got no reply from
// Redis for the lease's lifetime (a call that hangs) is taken over by one
// waiter, under the lease as any other process would, and the others wait
// for that one: never more than one refill of a SKU at a time per
// process. A refill that is only slow (a starved machine: every reply
// late) is not taken over: its replacement would wait for the lease it
// holds, and every waiter would try its order again for nothing.
func (s *Store) refillShared(ctx context.Context, b *buckets, home int, want int64) (short, led bool, err error) {
	key := b.names[0]
	f := &flight{done: make(chan struct{}), home: home}
	f.want.Store(want)
	f.step()
	joined := time.Now()
	var in *flight // the refill this Deduct's line was added to
	for {
		v, busy := s.flights.LoadOrStore(key, f)
		if !busy {
			break
		}
		other := v.(*flight)
		if other != in && other.home == home {
			other.want.Add(want)
			in = other
		}
		t := time.NewTimer(bucketLease)
		select {
		case <-other.done:
			t.Stop()
			return other.short && joined.Before(other.soldFrom) && want > other.soldTotal, false, nil
		case <-ctx.Done():
			t.Stop()
			return false, false, fmt.Errorf("waiting for a refill of SKU %q: %w", key, ctx.Err())
		case <-t.C:
		}
		if other.stalled() && s.flights.CompareAndSwap(key, other, f) {
			f.step()
			break
		}
	}
	defer func() {
		s.flights.CompareAndDelete(key, f)
		close(f.done)
	}()
	short, err = s.refill(ctx, b, home, f)
	f.short = short && err == nil
	// Short of what every waiter wanted; this order's line is short only
	// if it wants more than there was.
	return f.short && want > f.soldTotal, true, err
}

// unsplit reports, without a read, whether the Store knows every SKU of
// items to have one bucket (the common case, at no cost on the hot path).
func (s *Store) unsplit(items []stock.Item) bool {
	now := time.Now()
	for _, it := range items {
		v, ok := s.bk.Load(it.SKU)
		if !ok {
			return false
		}
		b := v.(*buckets)
		if len(b.names) != 1 || now.Sub(b.read) >= bucketCacheTTL {
			return false
		}
	}
	return true
}

// publicErr names the SKU instead of its bucket in a *stock.SKUError err
// carries.
func publicErr(err error) error {
	var se *stock.SKUError
	if errors.As(err, &se) {
		se.SKU = skuOf(se.SKU)
	}
	return err
}

// bucketState is one bucket as a refill reads it.
type bucketState struct {
	exists bool
	avail  int64
	ver    int64
	gen    string
	out    map[string]string // departure records: transfer ID -> record
}

// refill moves available units from the SKU's other buckets to bucket
// home until home has f.want (read at each round: the Deducts waiting for
// the refill add their lines to it), under the SKU's transfer lease, after
// settling the transfers a refill that stopped halfway left behind. It
// reports short when home still has fewer than want after every other
// bucket gave all it had (f says when and how many there were).
func (s *Store) refill(ctx context.Context, b *buckets, home int, f *flight) (short bool, err error) {
	if home < 0 {
		return false, fmt.Errorf("SKU %q: %w", b.names[0], stock.ErrUnavailable)
	}
	token, drop, err := s.holdLease(ctx, b)
	if err != nil {
		return false, err
	}
	defer drop()
	for round := 0; ; round++ {
		f.step()
		if round > 2*refillRounds {
			return false, nil // departure records keep coming: try the order
		}
		from := time.Now()
		st, err := s.readBuckets(ctx, b)
		if err != nil {
			return false, err
		}
		f.step()
		if !st[home].exists {
			return false, &lostError{sku: b.names[home]}
		}
		// Settle the transfers whose departure records st holds (a refill
		// that stopped halfway, or this one's own in a round before), then
		// read again.
		ps, err := departures(st)
		if err != nil {
			return false, err
		}
		if len(ps) > 0 {
			if _, err := s.complete(ctx, b, ps, token, "in", from); err != nil {
				return false, err
			}
			continue
		}
		need := f.want.Load() - st[home].avail
		if need <= 0 {
			return false, nil
		}
		takes := plan(st, home, need)
		if len(takes) == 0 {
			// No other bucket has a unit. Sold out, if no bucket moved
			// between its read and a second read of every version: then
			// each held what was read over spans that overlap, so at
			// one instant all of them together had fewer than want.
			vers, err := s.versions(ctx, b, "ver")
			if err != nil {
				return false, err
			}
			if slices.EqualFunc(st, vers, func(x bucketState, v int64) bool { return x.ver == v }) {
				f.soldFrom, f.soldTotal = from, 0
				for _, x := range st {
					f.soldTotal += max(0, x.avail)
				}
				return true, nil
			}
			if round == refillRounds {
				return false, nil
			}
			continue
		}
		if round == refillRounds {
			// The other buckets keep draining under this refill (or
			// filling: units returned): the caller tries its order.
			return false, nil
		}
		got, err := s.transfer(ctx, b, home, st[home].gen, takes, token, round)
		if err != nil || got >= need {
			return false, err
		}
		// Short still: read every bucket again (orders drained a giver
		// between the read and the move, or the plan did not pick it).
	}
}

// departureTTL is how long a bucket's departure records live after its
// last transfer out: half its arrival markers' lifetime (twice this), so
// a record never outlives the marker that says its units arrived, and at
// least 30 s, far longer than a refill's steps take (complete stops a
// refill that took half of it).
func (s *Store) departureTTL() time.Duration { return max(s.keep/2, 30*time.Second) }

// refillRounds bounds the moves of one refill.
const refillRounds = 8

// holdLease takes the SKU's transfer lease under a new token, and returns
// the token and the call that drops it: that bumps the epoch and frees
// the lease even after ctx ended (the lease would expire anyway, the
// epoch must move). A take whose outcome is unknown (its reply lost) is
// dropped at once: it may hold the lease, which would keep every other
// refill of the SKU waiting until it expires.
func (s *Store) holdLease(ctx context.Context, b *buckets) (string, func(), error) {
	token, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	drop := func() {
		// Given far more than a round trip: on a starved machine a drop
		// cut off at one round trip left the lease to block the SKU's
		// refills until it expired. Its failure answers nothing: the
		// lease then expires by itself.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*bucketLease)
		defer cancel()
		_ = s.lease(dctx, b, "drop", token)
	}
	if err := s.takeLease(ctx, b, token); err != nil {
		if errors.Is(err, stock.ErrUnknownOutcome) {
			drop()
		}
		return "", nil, err
	}
	return token, drop, nil
}

// takeLease takes the SKU's transfer lease, waiting while another refill
// holds it.
func (s *Store) takeLease(ctx context.Context, b *buckets, token string) error {
	wait, until := time.Millisecond, time.Now().Add(bucketLease)
	for {
		res, err := bucketLeaseScript.Run(ctx, s.c, s.leaseKeys(b.names[0]),
			"take", token, bucketLease.Milliseconds()).Slice()
		if err != nil {
			return s.writeErr(ctx, err)
		}
		switch code, _ := replyCode(res); code {
		case "ok":
			return nil
		case "missing":
			return fmt.Errorf("SKU %q: %w: the gate lost its first bucket", b.names[0], stock.ErrUnavailable)
		case "busy":
			if time.Now().After(until) {
				// The holder outlived its lease without freeing it (a
				// stopped process, or a clock that does not move).
				return fmt.Errorf("SKU %q: %w: another refill of it did not finish in time", b.names[0], stock.ErrContention)
			}
		default:
			return badReply(res)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for a refill of SKU %q: %w", b.names[0], ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// leaseKeys are the keys of the scripts that take, or respect, a SKU's
// transfer lease (stock_bucket_lease.lua, stock_adjust.lua,
// stock_relist.lua): its first state, and the lease.
func (s *Store) leaseKeys(sku string) []string {
	return []string{s.stateKey(sku), s.skuKey(sku, leaseSuffix, "")}
}

// lease runs a 'tick' or 'drop' step of the transfer lease.
func (s *Store) lease(ctx context.Context, b *buckets, mode, token string) error {
	err := bucketLeaseScript.Run(ctx, s.c, s.leaseKeys(b.names[0]),
		mode, token, bucketLease.Milliseconds()).Err()
	return s.writeErr(ctx, err)
}

// readBuckets reads every bucket's available units and departure records,
// in one round trip.
func (s *Store) readBuckets(ctx context.Context, b *buckets) ([]bucketState, error) {
	avails := make([]*redis.SliceCmd, len(b.names))
	outs := make([]*redis.MapStringStringCmd, len(b.names))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, name := range b.names {
			avails[i] = p.HMGet(ctx, s.stateKey(name), "avail", "hold", "ver", "gen")
			outs[i] = p.HGetAll(ctx, s.skuKey(name, outSuffix, ""))
		}
	})
	st := make([]bucketState, len(b.names))
	for i := range b.names {
		v, err := avails[i].Result()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		if st[i].out, err = outs[i].Result(); err != nil {
			return nil, s.readErr(ctx, err)
		}
		if str, _ := v[0].(string); str != "" && v[1] != nil {
			st[i].exists = true
			if st[i].avail, err = strconv.ParseInt(str, 10, 64); err != nil {
				return nil, badReply(v)
			}
		}
		if str, _ := v[2].(string); str != "" {
			if st[i].ver, err = strconv.ParseInt(str, 10, 64); err != nil {
				return nil, badReply(v)
			}
		}
		st[i].gen, _ = v[3].(string)
	}
	return st, nil
}

// pending is one transfer on its way: the bucket it left, its ID and its
// departure record.
type pending struct {
	from int
	id   string
	departure
}

// departures lists the transfers whose departure records st holds.
func departures(st []bucketState) ([]pending, error) {
	var ps []pending
	for i := range st {
		for id, rec := range st[i].out {
			d, err := parseDeparture(rec)
			if err != nil {
				return nil, err
			}
			ps = append(ps, pending{i, id, d})
		}
	}
	return ps, nil
}

// complete settles transfers on their way: they arrive (mode "in", once
// each) or, in mode "void" (PutOnSale, which overwrites the counts), are
// dropped; then the lease's epoch moves (when a lease token is given) and
// their departure records are cleared. It returns each transfer's marker,
// by ID. In mode "in", once half the records' lifetime (departureTTL) has
// passed since read, it does nothing: the records may have expired, and a
// reconciler may have added their units back, so only a refill that reads
// them again may make them arrive.
func (s *Store) complete(ctx context.Context, b *buckets, ps []pending, token, mode string, read time.Time) (map[string]string, error) {
	if mode == "in" && time.Since(read) > s.departureTTL()/2 {
		return nil, nil
	}
	to := map[string][]pending{}
	for _, p := range ps {
		to[p.dest] = append(to[p.dest], p)
	}
	words := make(map[string]string, len(ps))
	for dest, as := range to {
		got, err := s.arrive(ctx, dest, mode, as)
		if err != nil {
			return nil, err
		}
		for j, a := range as {
			words[a.id] = got[j]
		}
	}
	if token != "" {
		if err := s.lease(ctx, b, "tick", token); err != nil {
			return nil, err
		}
	}
	by := map[int][]any{}
	for _, p := range ps {
		// In mode "in", units that will never arrive ('void') go back to
		// the bucket they left; anything else drops the record.
		act := "drop"
		if mode == "in" && words[p.id] == "void" {
			act = "back"
		}
		by[p.from] = append(by[p.from], p.id, act)
	}
	cmds := make([]*redis.Cmd, 0, len(by))
	s.pipelined(ctx, func(pl redis.Pipeliner) {
		for i, args := range by {
			cmds = append(cmds, bucketClearScript.Run(ctx, pl, []string{s.stateKey(b.names[i]), s.skuKey(b.names[i], outSuffix, "")}, args...))
		}
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return nil, s.writeErr(ctx, err)
		}
	}
	return words, nil
}

// plan chooses what each other bucket gives to home, which lacks need
// units: what it has above an even share of the SKU's available units,
// and, should that not cover need, more from the fullest first. It is
// empty when the other buckets have nothing.
func plan(st []bucketState, home int, need int64) map[int]int64 {
	var total int64
	for i := range st {
		total += max(0, st[i].avail)
	}
	fair := total / int64(len(st))
	takes := map[int]int64{}
	var sum int64
	for i := range st {
		if i != home && st[i].avail > fair {
			takes[i] = st[i].avail - fair
			sum += takes[i]
		}
	}
	order := make([]int, 0, len(st))
	for i := range st {
		if i != home {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return int(st[b].avail - takes[b] - (st[a].avail - takes[a])) })
	for _, i := range order {
		if sum >= need {
			break
		}
		if more := min(st[i].avail-takes[i], need-sum); more > 0 {
			takes[i] += more
			sum += more
		}
	}
	return takes
}

// transfer takes the planned units out of the other buckets (one round
// trip), adds what they gave to home (one script), bumps the epoch, then
// clears the departure records, under the lease token. Each transfer's ID
// is the token, the refill's round and the giver's number: new for every
// move (a marker of an earlier one would swallow its units). It returns
// the units that arrived.
func (s *Store) transfer(ctx context.Context, b *buckets, home int, homeGen string, takes map[int]int64, token string, round int) (got int64, err error) {
	move := token + "." + strconv.Itoa(round)
	now := strconv.FormatInt(s.nowMs(), 10)
	type taken struct {
		from int
		id   string
		cmd  *redis.Cmd
	}
	outs := make([]taken, 0, len(takes))
	sent := time.Now()
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, n := range takes {
			id := move + "." + strconv.Itoa(i)
			outs = append(outs, taken{i, id, bucketOutScript.Run(ctx, p,
				[]string{s.stateKey(b.names[i]), s.skuKey(b.names[i], outSuffix, "")}, id, n, b.names[home], now, homeGen, s.departureTTL().Milliseconds())})
		}
	})
	var ps []pending
	for _, t := range outs {
		res, err := t.cmd.Slice()
		if err != nil {
			return 0, s.writeErr(ctx, err)
		}
		code, n := replyCode(res)
		if code == "missing" {
			continue
		}
		if (code != "ok" && code != "dup") || len(res) != 3 {
			return 0, badReply(res)
		}
		if n > 0 {
			ps = append(ps, pending{t.from, t.id, departure{dest: b.names[home], units: n, gen: homeGen}})
		}
	}
	if len(ps) == 0 {
		return 0, nil
	}
	words, err := s.complete(ctx, b, ps, token, "in", sent)
	if err != nil {
		return 0, err
	}
	for _, p := range ps {
		if words[p.id] == "in" { // else the home bucket lost its state meanwhile
			got += p.units
		}
	}
	return got, nil
}

// departure is one departure record: where its units go, how many, and
// the gen of the state they were meant for.
type departure struct {
	dest  string
	units int64
	gen   string
}

func parseDeparture(rec string) (departure, error) {
	parts := strings.Split(rec, "\n")
	if len(parts) != 4 {
		return departure{}, badReply(rec)
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return departure{}, badReply(rec)
	}
	return departure{dest: parts[0], units: n, gen: parts[3]}, nil
}

// arrive runs stock_bucket_in.lua at dest for the transfers ps in mode
// ("in" or "void"), and returns each transfer's marker.
func (s *Store) arrive(ctx context.Context, dest, mode string, ps []pending) ([]string, error) {
	keys := []string{s.stateKey(dest)}
	args := []any{mode, 2 * s.departureTTL().Milliseconds()}
	for _, p := range ps {
		keys = append(keys, s.skuKey(dest, inSuffix, p.id))
		args = append(args, p.units, p.gen)
	}
	res, err := bucketInScript.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return nil, s.writeErr(ctx, err)
	}
	if len(res) != len(ps)+1 {
		return nil, badReply(res)
	}
	words := make([]string, len(ps))
	for j := range ps {
		words[j], _ = res[j+1].(string)
	}
	return words, nil
}

// restoreBucket gives bucket i of a SKU whose first state lives an empty
// state with the first state's settings, if it has none (see Buckets in
// the package doc).
func (s *Store) restoreBucket(ctx context.Context, b *buckets, i int) error {
	v, err := s.c.HMGet(ctx, s.stateKey(b.names[0]), stateFields...).Result()
	if err != nil {
		return s.readErr(ctx, err)
	}
	first, err := parseState(b.names[0], v)
	if err != nil || !first.Exists {
		return err // the whole SKU is lost: a rebuild restores it
	}
	if n, _ := s.c.HGet(ctx, s.stateKey(b.names[0]), "bk").Int(); n != len(b.names) {
		return nil // the SKU was rebuilt with another count: route again
	}
	l := stock.Listing{SKU: b.names[i], PerUserLimit: first.PerUserLimit, HoldTTL: first.HoldTTL, MaxHoldTTL: first.MaxHoldTTL}
	if o, err := s.rebuild(ctx, []Rebuild{{Listing: l}}); err != nil || o[0] != Applied {
		return err
	}
	return s.setCount(ctx, b, i)
}

// CheckListing reports, writing nothing, what PutOnSale would refuse in
// l: stock.ErrInvalid for a bad listing and, on a Redis Cluster, for a
// bucket count other than the one the SKU was first put on sale with. A
// flow that writes its record before the gate (package tiered) asks it
// first, so that a refused listing leaves both tiers as they were. It
// reads the SKU's buckets (a round trip or two on a Cluster, none on one
// server); a first listing of the SKU in another count that lands between
// the check and PutOnSale is still refused there.
func (s *Store) CheckListing(ctx context.Context, l stock.Listing) (err error) {
	defer named(&err, "check listing of SKU", l.SKU)
	if err := l.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx); err != nil || !s.bucketed {
		return err
	}
	_, _, _, err = s.bucketCount(ctx, l)
	return err
}

// KeepsBuckets reports whether the Store keeps a bucket count per SKU
// (stock.Listing.Buckets): on a Redis Cluster. On one server every SKU is
// one bucket, and Buckets is ignored.
func (s *Store) KeepsBuckets() bool { return s.bucketed }

// bucketCount reads the buckets of l's SKU afresh: n, the count l puts
// it in (its own, or the SKU's when zero), have, the SKU's, and whether
// its first state exists; a count other than the SKU's is stock.ErrInvalid.
func (s *Store) bucketCount(ctx context.Context, l stock.Listing) (n, have int, exists bool, err error) {
	s.forget(l.SKU)
	bs, err := s.bucketsOf(ctx, []string{l.SKU})
	if err != nil {
		return 0, 0, false, err
	}
	exists, err = s.c.HExists(ctx, s.stateKey(l.SKU), "hold").Result()
	if err != nil {
		return 0, 0, false, s.readErr(ctx, err)
	}
	if !exists && len(bs[0].names) == 1 {
		// The first state and the counts hash are gone: other buckets
		// may still live.
		if err := s.probeBuckets(ctx, []string{l.SKU}, bs); err != nil {
			return 0, 0, false, err
		}
	}
	have, n = len(bs[0].names), l.Buckets
	if n == 0 {
		n = have
	}
	if n != have && (exists || have > 1) {
		return 0, 0, false, &stock.InvalidError{Field: "listing.Buckets", Reason: "SKU " + strconv.Quote(l.SKU) + " is in " +
			strconv.Itoa(have) + " bucket(s); a SKU's bucket count is set when it is first put on sale (sell it under a new SKU)"}
	}
	return n, have, exists, nil
}

// putBuckets is PutOnSale on a Redis Cluster. It reports false, having
// done nothing, for a listing of one bucket that the SKU already has (or
// a SKU new to the gate): the caller puts it as any SKU. Otherwise it
// puts the SKU's units, split evenly, on each of its buckets (the SKU's
// own state last), under the SKU's transfer lease once the SKU has a
// state; a count other than the SKU's is stock.ErrInvalid with nothing
// written.
func (s *Store) putBuckets(ctx context.Context, l stock.Listing) (bool, error) {
	if !s.bucketed {
		return false, nil
	}
	n, have, exists, err := s.bucketCount(ctx, l)
	if err != nil || (n == 1 && have == 1) {
		return false, err
	}
	gens, err := newGens(ctx, n)
	if err != nil {
		return false, err
	}
	b := &buckets{names: bucketNames(l.SKU, n)}
	token := ""
	if exists {
		var drop func()
		if token, drop, err = s.holdLease(ctx, b); err != nil {
			return false, err
		}
		defer drop()
	}
	// Drop every transfer on its way: the counts are overwritten.
	for range refillRounds {
		st, err := s.readBuckets(ctx, b)
		if err != nil {
			return false, err
		}
		ps, err := departures(st)
		if err != nil {
			return false, err
		}
		if len(ps) == 0 {
			break
		}
		if _, err := s.complete(ctx, b, ps, token, "void", time.Now()); err != nil {
			return false, err
		}
	}
	share := func(i int) int64 {
		u := l.Units / int64(n)
		if int64(i) < l.Units%int64(n) {
			u++
		}
		return u
	}
	put := func(from, to int) error {
		cmds := make([]redis.Cmder, 0, 3*(to-from))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i := from; i < to; i++ {
				name := b.names[i]
				cmds = append(cmds, p.SAdd(ctx, s.registryKey(), name, s.mark()), p.HSet(ctx, s.countsKey(), l.SKU, n),
					putScript.Run(ctx, p, []string{s.stateKey(name), s.claimKey(name)},
						share(i), l.PerUserLimit, l.EffectiveHoldTTL().Milliseconds(), gens[i], l.EffectiveMaxHoldTTL().Milliseconds()),
					p.HSet(ctx, s.stateKey(name), "bk", n))
			}
		})
		return s.writeErr(ctx, firstErr(cmds...))
	}
	if err := put(1, n); err != nil {
		return true, err
	}
	if err := put(0, 1); err != nil {
		return true, err
	}
	s.listed.Store(true)
	b.read = time.Now()
	s.bk.Store(l.SKU, b)
	return true, nil
}

// levelReads bounds how often bucketLevels reads a SKU's buckets while
// orders keep changing them.
const levelReads = 8

// putSplit puts the listings of SKUs that are or are to be split into
// buckets (putBuckets) and returns the others.
func (s *Store) putSplit(ctx context.Context, ls []stock.Listing) ([]stock.Listing, error) {
	skus := skusOf(ls, func(l stock.Listing) string { return l.SKU })
	bs, err := s.bucketsOf(ctx, skus)
	if err != nil {
		return nil, err
	}
	var rest []stock.Listing
	for i, l := range ls {
		if l.Buckets <= 1 && len(bs[i].names) == 1 {
			rest = append(rest, l)
			continue
		}
		if done, err := s.putBuckets(ctx, l); err != nil {
			return nil, err
		} else if !done {
			rest = append(rest, l)
		}
	}
	return rest, nil
}

// bucketLevels reads the units of every bucket of b and sums them,
// units on their way included; Version sums the buckets'. It reads every
// bucket's version again after: when none moved, each bucket held what
// was read over spans that overlap, so the sum is the SKU's at one
// instant. When orders keep moving them it reads again, up to levelReads
// times, then answers the last sum.
func (s *Store) bucketLevels(ctx context.Context, b *buckets) (SKUState, error) {
	var sum SKUState
	for range levelReads {
		var vers []int64
		var err error
		if sum, vers, err = s.sumBuckets(ctx, b); err != nil {
			return SKUState{}, err
		}
		again, err := s.versions(ctx, b, "ver")
		if err != nil {
			return SKUState{}, err
		}
		if slices.Equal(vers, again) {
			break
		}
	}
	return sum, nil
}

// versions reads every bucket's counter field (ver, its version, or xv,
// its transfer count; 0 for a bucket with no state), in one round trip.
func (s *Store) versions(ctx context.Context, b *buckets, field string) ([]int64, error) {
	cmds := make([]*redis.StringCmd, len(b.names))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, name := range b.names {
			cmds[i] = p.HGet(ctx, s.stateKey(name), field)
		}
	})
	out := make([]int64, len(b.names))
	for i, c := range cmds {
		n, err := c.Int64()
		if err != nil && err != redis.Nil {
			return nil, s.readErr(ctx, err)
		}
		out[i] = n
	}
	return out, nil
}

// sumBuckets is one reading of bucketLevels, with the versions read.
func (s *Store) sumBuckets(ctx context.Context, b *buckets) (SKUState, []int64, error) {
	vers := make([]int64, len(b.names))
	cmds := make([]*redis.SliceCmd, len(b.names))
	outs := make([]*redis.MapStringStringCmd, len(b.names))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, name := range b.names {
			cmds[i] = p.HMGet(ctx, s.stateKey(name), stateFields...)
			outs[i] = p.HGetAll(ctx, s.skuKey(name, outSuffix, ""))
		}
	})
	var sum SKUState
	for i, name := range b.names {
		v, err := cmds[i].Result()
		if err != nil {
			return SKUState{}, nil, s.readErr(ctx, err)
		}
		st, err := parseState(name, v)
		if err != nil {
			return SKUState{}, nil, err
		}
		vers[i] = st.Version
		if i == 0 {
			sum = st
			sum.SKU = b.names[0]
			continue
		}
		sum.Available += st.Available
		sum.Held += st.Held
		sum.Sold += st.Sold
		sum.Version += st.Version
	}
	away, err := s.onTheWay(ctx, outs)
	sum.Available += away
	return sum, vers, err
}

// onTheWay sums the units of the departure records outs read that have
// not arrived, or go back to the bucket they left (see Buckets in the
// package doc).
func (s *Store) onTheWay(ctx context.Context, outs []*redis.MapStringStringCmd) (int64, error) {
	type dep struct {
		departure
		marker *redis.StringCmd
		now    *redis.StringCmd // the destination state's gen
	}
	var deps []dep
	var err error
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, c := range outs {
			recs, rerr := c.Result()
			if rerr != nil {
				err = rerr
				return
			}
			for id, rec := range recs {
				d, perr := parseDeparture(rec)
				if perr != nil {
					err = perr
					return
				}
				deps = append(deps, dep{d, p.Get(ctx, s.skuKey(d.dest, inSuffix, id)), p.HGet(ctx, s.stateKey(d.dest), "gen")})
			}
		}
	})
	if err != nil {
		return 0, s.readErr(ctx, err)
	}
	var away int64
	for _, d := range deps {
		m, err := d.marker.Result()
		if err != nil && err != redis.Nil {
			return 0, s.readErr(ctx, err)
		}
		gen, err := d.now.Result()
		if err != nil && err != redis.Nil {
			return 0, s.readErr(ctx, err)
		}
		// Not yet arrived, and either going back ('void', or no state
		// to arrive at) or still to arrive at the state it was meant
		// for; one meant for a state lost since will be dropped.
		if m == "void" || (m == "" && (gen == "" || gen == d.gen)) {
			away += d.units
		}
	}
	return away, nil
}

// splitSKU returns the buckets of sku when it has more than one (nil
// otherwise).
func (s *Store) splitSKU(ctx context.Context, sku string) (*buckets, error) {
	bs, err := s.splitAll(ctx, []string{sku})
	if bs == nil {
		return nil, err
	}
	return bs[0], nil
}

// toBuckets names, in the return's items, the bucket the order holds each
// SKU in (the order's lines, by slot group) instead of the SKU.
func (rt *giveBack) toBuckets(groups [][]stock.Item) {
	moved := false
	for i, it := range rt.items {
		for _, g := range groups {
			for _, l := range g {
				if l.SKU != it.SKU && skuOf(l.SKU) == it.SKU {
					rt.items[i].SKU, moved = l.SKU, true
				}
			}
		}
	}
	if moved {
		rt.items = canon.Sorted(rt.items)
		rt.sig = canon.Signature(rt.items)
	}
}

// bucketSettingsScript gives a bucket the settings of a Relist; see its
// header in package lua.
var bucketSettingsScript = redis.NewScript(lua.Script("stock_bucket_settings.lua"))

func init() { allScripts = append(allScripts, bucketSettingsScript) }

// splitAll returns the buckets of each SKU that has more than one (nil
// entries for the others), or nil when none has.
func (s *Store) splitAll(ctx context.Context, skus []string) ([]*buckets, error) {
	if !s.bucketed || len(skus) == 0 {
		return nil, nil
	}
	bs, err := s.bucketsOf(ctx, skus)
	if err != nil {
		return nil, err
	}
	some := false
	for i, b := range bs {
		if len(b.names) == 1 {
			bs[i] = nil
		} else {
			some = true
		}
	}
	if !some {
		return nil, nil
	}
	return bs, nil
}

// eachSplit calls f with the index and buckets of each SKU of skus split
// into buckets.
func (s *Store) eachSplit(ctx context.Context, skus []string, f func(i int, b *buckets) error) error {
	bs, err := s.splitAll(ctx, skus)
	for i, b := range bs {
		if b != nil {
			if err := f(i, b); err != nil {
				return err
			}
		}
	}
	return err
}

// snapshotSplit reads the SKU of r, split into the buckets b: every
// bucket's snapshot and the units on their way, between two readings of
// every bucket's transfer count (xv), so that each unit is counted once
// (see Buckets in the package doc). Deducts and returns meanwhile move
// units within one bucket only, as they do between the Snapshot of an
// unsplit SKU and a correction computed from it.
func (s *Store) snapshotSplit(ctx context.Context, b *buckets, r SnapshotRequest) (Snapshot, error) {
	sub := make([]SnapshotRequest, len(b.names))
	sub[0] = r
	for j := 1; j < len(sub); j++ {
		sub[j] = SnapshotRequest{SKU: b.names[j], Orders: r.Orders}
	}
	var sn Snapshot
	for range levelReads {
		before, err := s.versions(ctx, b, "xv")
		if err != nil {
			return Snapshot{}, err
		}
		got, err := s.snapshotBatch(ctx, sub)
		if err != nil {
			return Snapshot{}, err
		}
		outs := make([]*redis.MapStringStringCmd, len(b.names))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for j, name := range b.names {
				outs[j] = p.HGetAll(ctx, s.skuKey(name, outSuffix, ""))
			}
		})
		away, err := s.onTheWay(ctx, outs)
		if err != nil {
			return Snapshot{}, err
		}
		after, err := s.versions(ctx, b, "xv")
		if err != nil {
			return Snapshot{}, err
		}
		sn = mergeSnapshots(r.SKU, got, away)
		if slices.Equal(before, after) {
			return sn, nil
		}
	}
	// Transfers kept coming: the last reading, with a Fence no state has,
	// so no correction computed from it is applied.
	sn.Fence = Fence{}
	return sn, nil
}

// mergeSnapshots sums the snapshots of a SKU's buckets, got (the first
// bucket's first), with away units on their way between them.
func mergeSnapshots(sku string, got []Snapshot, away int64) Snapshot {
	sn := got[0]
	sn.Available += away
	for _, g := range got[1:] {
		sn.Available += g.Available
		sn.Held += g.Held
		sn.Sold += g.Sold
		sn.Version += g.Version
		sn.Holds = append(sn.Holds, g.Holds...)
		sn.Lost = append(sn.Lost, g.Lost...)
		for k, st := range g.Lines {
			if sn.Lines[k] == stock.StateUnknown {
				sn.Lines[k] = st
			}
		}
	}
	for k := range sn.Holds {
		sn.Holds[k].SKU = sku
	}
	slices.SortStableFunc(sn.Holds, func(a, b Hold) int { return a.Deadline.Compare(b.Deadline) })
	return sn
}

// gatherFirst makes the first bucket of b hold at least want available
// units before a correction takes them away (refill). It reports whether
// the correction may run now (not when units moved: the Fence moved with
// them), and short when all the buckets together have fewer than want.
func (s *Store) gatherFirst(ctx context.Context, b *buckets, want int64) (ready, short bool, err error) {
	avail, err := s.c.HGet(ctx, s.stateKey(b.names[0]), "avail").Int64()
	if err == redis.Nil {
		return true, false, nil // no state: the correction's script says so
	}
	if err != nil {
		return false, false, s.readErr(ctx, err)
	}
	if avail >= want {
		return true, false, nil
	}
	f := &flight{}
	f.want.Store(want)
	short, err = s.refill(ctx, b, 0, f)
	return false, short, err
}

// relistBucketed is Relist of one SKU split into buckets (see Buckets in
// the package doc).
func (s *Store) relistBucketed(ctx context.Context, b *buckets, rl Relist) (Outcome, error) {
	if !rl.Force {
		st, err := s.bucketLevels(ctx, b)
		if err != nil {
			return 0, err
		}
		if st.Held > 0 {
			return HasHolds, nil
		}
	}
	if rl.Delta < 0 {
		ready, short, err := s.gatherFirst(ctx, b, -rl.Delta)
		switch {
		case err != nil:
			return 0, err
		case short:
			return OutOfRange, nil
		case !ready:
			return Moved, nil
		}
	}
	// The other buckets' settings first, the fenced write on the first
	// last (see Buckets in the package doc).
	l := stock.Listing{HoldTTL: rl.HoldTTL, MaxHoldTTL: rl.MaxHoldTTL}
	cmds := make([]*redis.Cmd, len(b.names)-1)
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for j, name := range b.names[1:] {
			cmds[j] = bucketSettingsScript.Run(ctx, p, []string{s.stateKey(name)}, rl.PerUserLimit,
				l.EffectiveHoldTTL().Milliseconds(), l.EffectiveMaxHoldTTL().Milliseconds())
		}
	})
	if err := s.writeErr(ctx, errOf(cmds)); err != nil {
		return 0, err
	}
	out, err := s.relistStates(ctx, []Relist{rl})
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// probeBuckets sets bs[i], for each SKU whose count no state or counts
// hash names any more (one bucket), to the buckets of the count a
// surviving bucket's state names, reading every possible bucket name in
// one round trip.
func (s *Store) probeBuckets(ctx context.Context, skus []string, bs []*buckets) error {
	type probe struct {
		sku int
		cmd *redis.StringCmd
	}
	var probes []probe
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, sku := range skus {
			if len(bs[i].names) > 1 {
				continue
			}
			for n := 2; n <= stock.MaxBuckets; n++ {
				for _, name := range bucketNames(sku, n)[1:] {
					probes = append(probes, probe{i, p.HGet(ctx, s.stateKey(name), "bk")})
				}
			}
		}
	})
	for _, pr := range probes {
		n, err := pr.cmd.Int()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return s.readErr(ctx, err)
		}
		if n > 1 && n <= stock.MaxBuckets {
			bs[pr.sku] = &buckets{names: bucketNames(skus[pr.sku], n)}
		}
	}
	return nil
}

// rebuildBucketed is Rebuild of one SKU split into buckets whose first
// state is missing (see Buckets in the package doc); every other bucket
// without a state gets an empty one. Where another bucket's state lived,
// the first gets an empty one too, and the SKU, whose units are then the
// living buckets' (and the transfers under way between them), not the
// listing's, is reported as Partial.
func (s *Store) rebuildBucketed(ctx context.Context, b *buckets, r Rebuild) (Outcome, error) {
	st, err := s.readBuckets(ctx, b)
	if err != nil {
		return 0, err
	}
	survived := slices.ContainsFunc(st[1:], func(x bucketState) bool { return x.exists })
	first := r
	if survived {
		first.Listing.Units = 0
	}
	// The count first, into the counts hash (lost with the first state
	// when both lived on one master): a Rebuild that stops after writing
	// the first state and before its bk leaves the count where every
	// read of a first state without bk looks (bucketsOf).
	var kept *redis.IntCmd
	s.pipelined(ctx, func(p redis.Pipeliner) { kept = p.HSet(ctx, s.countsKey(), b.names[0], len(b.names)) })
	if err := kept.Err(); err != nil {
		return 0, s.writeErr(ctx, err)
	}
	out, err := s.rebuild(ctx, []Rebuild{first})
	if err != nil {
		return 0, err
	}
	if out[0] != Applied && out[0] != Exists {
		return out[0], nil
	}
	if err := s.setCount(ctx, b, 0); err != nil {
		return 0, err
	}
	for i := 1; i < len(b.names); i++ {
		if st[i].exists {
			continue
		}
		l := r.Listing
		l.SKU, l.Units = b.names[i], 0
		if o, err := s.rebuild(ctx, []Rebuild{{Listing: l}}); err != nil || o[0] != Applied {
			if err != nil {
				return 0, err
			}
			continue
		}
		if err := s.setCount(ctx, b, i); err != nil {
			return 0, err
		}
	}
	if survived && out[0] == Applied {
		return Partial, nil
	}
	return out[0], nil
}
