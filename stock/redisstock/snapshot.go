package redisstock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

// snapshotScript reads a SKU atomically; see the header of
// lua/stock_snapshot.lua.
var snapshotScript = redis.NewScript(lua.Script("stock_snapshot.lua"))

// SnapshotRequest names a SKU to read, the orders whose line of that SKU
// should be read in the same atomic step, and the restock operations (their
// OpIDs) whose application to that SKU should be checked in it.
type SnapshotRequest struct {
	SKU    string
	Orders []string
	Ops    []string
}

// Snapshot is one SKU as a single atomic read saw it.
type Snapshot struct {
	SKUState
	// Holds are the SKU's live holds at that instant (those Held counts),
	// in deadline order, each with what it still holds (its line less
	// what partial reverts gave back; a line they emptied is left out).
	Holds []Hold
	// Lines are the states of the requested orders' lines of this SKU,
	// in request order; StateUnknown for a line Redis has no record of.
	Lines []stock.State
	// Lost lists holds whose line record is gone (keys deleted by hand or
	// a partial flush): their quantity is unknown and Holds omits them.
	// A hold queue keeps entries of ended holds until the reclaimer takes
	// them off, and their records may be gone: an entry without a record
	// is lost only while its order's directory entry is live and names
	// the SKU.
	Lost []string
	// OpsApplied says, in request order, whether each requested restock
	// operation was applied to the SKU (or counted by a Rebuild) within the
	// Store's Retention: its units are in the counts above.
	OpsApplied []bool
}

// snapshotBatch is how many SKUs one pipelined snapshot covers.
const snapshotBatch = 1024

// Snapshot reads each SKU's state, its holds and the states of the
// requested order lines, each SKU in one atomic script call, in two round
// trips per 1024 SKUs (the scripts, then the quantities of the holds; a
// third when a hold queue has entries whose line record is missing: their
// orders' directory entries tell a lost record from an ended one). A
// SKU one of whose holds was dropped between the two (an undone Deduct
// attempt deletes its holds' records, and the ID may hold again under a
// record of another order), or one of whose lines a partial return changed
// between them (the SKU's state counts both, field rn, read after the
// quantities), is read again, so that every hold of the instant read has
// its quantity as of that instant, or is Lost.
// Different SKUs are read at slightly different moments.
//
// Its one write keeps the Store's registry of SKUs on sale whole: a SKU
// read with a state that the registry no longer names (the registry's key
// was lost alone: its Cluster master lost its data, or it was evicted) is
// added back, marking a recreated registry incomplete as a rebuild does
// (see [Store.Calibrated]), so that ReclaimExpired, which walks the
// registry, returns that SKU's holds again. That costs one more round trip,
// on that path only.
func (s *Store) Snapshot(ctx context.Context, reqs []SnapshotRequest) (_ []Snapshot, err error) {
	defer named(&err, "snapshot", "")
	for i, r := range reqs {
		if err := stock.ValidateID("reqs["+strconv.Itoa(i)+"].SKU", r.SKU); err != nil {
			return nil, err
		}
		for j, id := range r.Orders {
			if err := stock.ValidateID("reqs["+strconv.Itoa(i)+"].Orders["+strconv.Itoa(j)+"]", id); err != nil {
				return nil, err
			}
		}
		for j, id := range r.Ops {
			if err := stock.ValidateID("reqs["+strconv.Itoa(i)+"].Ops["+strconv.Itoa(j)+"]", id); err != nil {
				return nil, err
			}
		}
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	out := make([]Snapshot, 0, len(reqs))
	for start := 0; start < len(reqs); start += snapshotBatch {
		got, err := s.snapshotBatch(ctx, reqs[start:min(start+snapshotBatch, len(reqs))])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	skus := skusOf(reqs, func(r SnapshotRequest) string { return r.SKU })
	// A SKU split into buckets: one snapshot of all its buckets.
	err = s.eachSplit(ctx, skus, func(i int, b *buckets) (err error) {
		out[i], err = s.snapshotSplit(ctx, b, reqs[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// snapshotRereads bounds how often Snapshot reads a SKU again whose holds
// keep ending, records deleted, between its two round trips.
const snapshotRereads = 8

// errHoldsEnding: a SKU's holds kept ending between Snapshot's two round
// trips.
var errHoldsEnding = errors.New("a SKU's holds kept ending while it was read, try again")

func (s *Store) snapshotBatch(ctx context.Context, reqs []SnapshotRequest) ([]Snapshot, error) {
	out := make([]Snapshot, len(reqs))
	todo := make([]int, len(reqs)) // the requests still to read
	for i := range todo {
		todo[i] = i
	}
	for read := 0; len(todo) > 0; read++ {
		if read == snapshotRereads {
			return nil, withCtx(ctx, errHoldsEnding)
		}
		got, ended, err := s.snapshotOnce(ctx, reqs, todo)
		if err != nil {
			return nil, err
		}
		var again []int
		for k, i := range todo {
			if ended[k] {
				again = append(again, i)
			} else {
				out[i] = got[k]
			}
		}
		todo = again
	}
	return out, nil
}

// snapshotOnce reads the requests numbered todo, and reports for each
// whether a hold of the instant read ended, its record deleted, before
// its quantity was read (read it again).
func (s *Store) snapshotOnce(ctx context.Context, reqs []SnapshotRequest, todo []int) ([]Snapshot, []bool, error) {
	cmds := make([]*redis.Cmd, len(todo))
	skus := make([]any, len(todo))
	var listed *redis.BoolSliceCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k, i := range todo {
			r := reqs[i]
			skus[k] = r.SKU
			keys := make([]string, 0, 4+len(r.Ops))
			keys = append(keys, s.stateKey(r.SKU), s.holdsKey(r.SKU), s.linesKey(r.SKU), s.queueKey(r.SKU))
			for _, op := range r.Ops {
				keys = append(keys, s.opMarkerKey(r.SKU, op))
			}
			args := make([]any, 0, len(r.Orders))
			for _, id := range r.Orders {
				args = append(args, id)
			}
			cmds[k] = snapshotScript.Run(ctx, p, keys, args...)
		}
		listed = p.SMIsMember(ctx, s.registryKey(), skus...)
	})
	out := make([]Snapshot, len(todo))
	ids := make([][]string, len(todo))
	miss := make([][]string, len(todo))
	rns := make([]string, len(todo))
	for k, c := range cmds {
		res, err := c.Slice()
		if err != nil {
			return nil, nil, s.readErr(ctx, err)
		}
		if err := parseSnapshot(&out[k], reqs[todo[k]], res, &ids[k], &rns[k], &miss[k]); err != nil {
			return nil, nil, err
		}
	}
	in, err := listed.Result()
	if err != nil {
		return nil, nil, s.readErr(ctx, err)
	}
	if len(in) != len(todo) {
		return nil, nil, badReply(in)
	}
	if err := s.relist(ctx, out, in); err != nil {
		return nil, nil, err
	}
	ended, err := s.holdQtys(ctx, out, ids, rns)
	if err == nil {
		err = s.lostQueued(ctx, out, miss)
	}
	return out, ended, err
}

// lostQueued adds to each snapshot of out the holds of its hold queue
// whose line record was missing (miss) while their order's directory entry
// is live and names the SKU: records lost, not deleted after their order
// ended (an ended hold's queue entry can outlive its record). It costs one
// round trip, on that path only.
func (s *Store) lostQueued(ctx context.Context, out []Snapshot, miss [][]string) error {
	if !slices.ContainsFunc(miss, func(m []string) bool { return len(m) > 0 }) {
		return nil
	}
	entries := make([][]*redis.StringCmd, len(out))
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, m := range miss {
			for _, id := range m {
				entries[i] = append(entries[i], p.HGet(ctx, s.dirKey(id), id))
			}
		}
		at = p.Time(ctx)
	})
	now, err := serverMs(at) // entries end by the server's time
	if err != nil {
		return s.readErr(ctx, err)
	}
	for i, m := range miss {
		for j, id := range m {
			v, err := entries[i][j].Result()
			if err != nil && err != redis.Nil {
				return s.readErr(ctx, err)
			}
			d, ok, err := parseEntry(v, now)
			if err != nil {
				return badReply(v)
			}
			if !ok || d.e != 0 {
				continue
			}
			items, err := parseIdent(d.ident)
			if err == nil && slices.ContainsFunc(items, func(it stock.Item) bool { return it.SKU == out[i].SKU }) {
				out[i].Lost = append(out[i].Lost, id)
			}
		}
	}
	return nil
}

// relist adds to the registry, in one round trip, the SKUs of out that
// have a state and that it does not name (in[i]: it names out[i]); see
// Snapshot.
func (s *Store) relist(ctx context.Context, out []Snapshot, in []bool) error {
	var skus []string
	for i := range out {
		if out[i].Exists && !in[i] {
			skus = append(skus, out[i].SKU)
		}
	}
	if len(skus) == 0 {
		return nil
	}
	cmds := make([]redis.Cmder, len(skus))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, sku := range skus {
			cmds[i] = s.rebuildRegistry(ctx, p, sku)
		}
	})
	if err := firstErr(cmds...); err != nil {
		// One failed reply among several sent may leave the others applied.
		return s.batchErr(ctx, err, 0, len(skus))
	}
	return nil
}

// parseSnapshot decodes one stock_snapshot.lua reply into sn, the holds'
// order IDs and deadlines into sn.Holds (quantities still unset), the
// state's count of partial returns and dropped holds into rn, and the hold
// queue's entries without a line record into miss.
func parseSnapshot(sn *Snapshot, r SnapshotRequest, res []any, ids *[]string, rn *string, miss *[]string) error {
	if len(res) != 6 {
		return badReply(res)
	}
	*rn, _ = res[4].(string)
	ms, _ := res[5].([]any)
	for _, m := range ms {
		id, ok := m.(string)
		if !ok {
			return badReply(res)
		}
		*miss = append(*miss, id)
	}
	st, _ := res[0].([]any)
	hs, ok1 := res[1].([]any)
	ws, ok2 := res[2].([]any)
	ops, ok3 := res[3].([]any)
	if st == nil || !ok1 || !ok2 || !ok3 || len(hs)%2 != 0 || len(ws) != len(r.Orders) || len(ops) != len(r.Ops) {
		return badReply(res)
	}
	state, err := parseState(r.SKU, st)
	if err != nil {
		return err
	}
	sn.SKUState = state
	for j := 0; j < len(hs); j += 2 {
		id, ok1 := hs[j].(string)
		score, ok2 := hs[j+1].(string)
		dl, err := strconv.ParseFloat(score, 64)
		if !ok1 || !ok2 || err != nil {
			return badReply(res)
		}
		sn.Holds = append(sn.Holds, Hold{OrderID: id, SKU: r.SKU, Deadline: time.UnixMilli(int64(dl))})
	}
	// The zset's holds come in deadline order, then the hold queue's.
	slices.SortStableFunc(sn.Holds, func(a, b Hold) int { return a.Deadline.Compare(b.Deadline) })
	for _, h := range sn.Holds {
		*ids = append(*ids, h.OrderID)
	}
	sn.Lines = make([]stock.State, len(ws))
	for j, w := range ws {
		name, _ := w.(string)
		sn.Lines[j] = stateNamed(name)
	}
	sn.OpsApplied = make([]bool, len(ops))
	for j, o := range ops {
		n, ok := o.(int64)
		if !ok {
			return badReply(res)
		}
		sn.OpsApplied[j] = n == 1
	}
	return nil
}

// holdQtys reads the quantity and user of every hold in out, in one round
// trip, and moves holds without a record to Lost: a record missing for
// good (the hold is still in the holds zset, read after the record on the
// same server), or because the hold ended since the script read it (an
// undone Deduct attempt): ended reports the snapshot to be read again.
func (s *Store) holdQtys(ctx context.Context, out []Snapshot, ids [][]string, rns []string) (ended []bool, err error) {
	ended = make([]bool, len(out))
	n := 0
	for _, x := range ids {
		n += len(x)
	}
	if n == 0 {
		return ended, nil
	}
	recs := make([]*redis.SliceCmd, len(out))
	ins := make([][]*redis.FloatCmd, len(out))
	rn := make([]*redis.StringCmd, len(out))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i := range out {
			if len(ids[i]) == 0 {
				continue
			}
			recs[i] = p.HMGet(ctx, s.linesKey(out[i].SKU), ids[i]...)
			for _, id := range ids[i] {
				ins[i] = append(ins[i], p.ZScore(ctx, s.holdsKey(out[i].SKU), id))
			}
			// After the records, on the same server: a partial return
			// or a dropped hold since the script moved rn.
			rn[i] = p.HGet(ctx, s.stateKey(out[i].SKU), "rn")
		}
	})
	for i := range out {
		if rn[i] == nil {
			continue
		}
		v, err := rn[i].Result()
		if err != nil && err != redis.Nil {
			return nil, s.readErr(ctx, err)
		}
		if v != rns[i] {
			ended[i] = true // a hold's quantity changed meanwhile: read again
			continue
		}
		vals, err := recs[i].Result()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		kept := out[i].Holds[:0]
		for j, v := range vals {
			h := out[i].Holds[j]
			r, ok, err := parseRecord(v, 0) // a hold's record: no end
			if err != nil {
				return nil, badReply(v)
			}
			if !ok {
				switch err := ins[i][j].Err(); {
				case err == redis.Nil:
					ended[i] = true // it ended meanwhile: its quantity is gone
				case err != nil:
					return nil, s.readErr(ctx, err)
				}
				out[i].Lost = append(out[i].Lost, h.OrderID)
				continue
			}
			if h.Qty = r.left(); h.Qty == 0 {
				continue // partial reverts gave it all back: it holds nothing
			}
			h.UserID = r.user()
			kept = append(kept, h)
		}
		out[i].Holds = kept
	}
	return ended, nil
}

// PutOnSaleMany is PutOnSale for many listings in one round trip per 1024
// listings. Each listing is applied atomically and on its own; on error
// some may have been applied (every one is safe to apply again). It
// overwrites whatever state a SKU has, live holds included: to restore a
// gate from its record, use Rebuild, which never does.
func (s *Store) PutOnSaleMany(ctx context.Context, ls []stock.Listing) (err error) {
	defer named(&err, "put on sale", "")
	for i := range ls {
		if err := ls[i].Validate(); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	if s.bucketed {
		// A SKU split into buckets (or to be split) is put on its own.
		var err error
		if ls, err = s.putSplit(ctx, ls); err != nil {
			return err
		}
	}
	return s.putStates(ctx, ls)
}

// putStates puts listings, each of one gate state, in one round trip per
// 1024.
func (s *Store) putStates(ctx context.Context, ls []stock.Listing) error {
	all, err := newGens(ctx, len(ls))
	if err != nil {
		return err
	}
	for start := 0; start < len(ls); start += snapshotBatch {
		batch := ls[start:min(start+snapshotBatch, len(ls))]
		gens := all[start:]
		cmds := make([]redis.Cmder, 0, 2*len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, l := range batch {
				cmds = append(cmds, p.SAdd(ctx, s.registryKey(), l.SKU, s.mark()),
					putScript.Run(ctx, p, []string{s.stateKey(l.SKU), s.claimKey(l.SKU)},
						l.Units, l.PerUserLimit, l.EffectiveHoldTTL().Milliseconds(), gens[i], l.EffectiveMaxHoldTTL().Milliseconds()))
			}
		})
		if err := firstErr(cmds...); err != nil {
			return s.batchErr(ctx, err, start, len(batch))
		}
		s.listed.Store(true)
	}
	return nil
}

// The conditional administrative scripts; see their headers in package lua.
var (
	rebuildScript = redis.NewScript(lua.Script("stock_rebuild.lua"))
	relistScript  = redis.NewScript(lua.Script("stock_relist.lua"))
)

// The conditional scripts run in pipelines, so a server that lacks them
// must get them loaded (see pipelined).
func init() { allScripts = append(allScripts, rebuildScript, relistScript) }

// Rebuild is one SKU to recreate from its record.
type Rebuild struct {
	// Listing gives the available units and settings of the new state.
	Listing stock.Listing
	// Ops are the OpIDs of restocks the record applied that Units already
	// counts: they are marked applied on the new state, so that a Restock
	// of one of them still on its way to the gate adds nothing.
	Ops []string
	// Claim, if set, is a token from [Store.ClaimRebuild] taken before the
	// record was read: the state is created only if the SKU's claim is
	// still this one (otherwise Moved: read again). A flush, another
	// claim, or any creation of the SKU's state since (a rebuild, a
	// PutOnSale, even one whose state was lost again) voids it, so a count
	// read before orders were taken from a state that was lost since is
	// never written.
	Claim string
}

// ClaimRebuild takes a rebuild claim on each SKU, before the caller reads
// the record for a [Store.Rebuild] of SKUs the gate has no state for, in
// one round trip per 1024 SKUs, and returns the tokens in input order. The
// latest claim on a SKU wins; a claim lives for the Store's Retention. A
// context already done returns its error with nothing sent.
func (s *Store) ClaimRebuild(ctx context.Context, skus []string) (_ []string, err error) {
	defer named(&err, "claim rebuild", "")
	for i, sku := range skus {
		if err := stock.ValidateID("skus["+strconv.Itoa(i)+"]", sku); err != nil {
			return nil, err
		}
	}
	tokens, err := newGens(ctx, len(skus))
	if err != nil {
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	for start := 0; start < len(skus); start += snapshotBatch {
		batch := skus[start:min(start+snapshotBatch, len(skus))]
		cmds := make([]redis.Cmder, len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, sku := range batch {
				cmds[i] = p.Set(ctx, s.claimKey(sku), tokens[start+i], s.keep)
			}
		})
		if err := firstErr(cmds...); err != nil {
			return nil, s.batchErr(ctx, err, start, len(batch))
		}
	}
	return tokens, nil
}

// Rebuild creates each SKU's state from its Listing, only where the SKU
// has no state (create-if-absent), in one round trip per 1024 SKUs: a
// state that exists, with whatever live holds it counts, is never
// overwritten, and is reported as Exists (read it again). A SKU split into
// buckets whose first bucket's state was missing while another bucket's
// lived gets an empty first state, and is reported as Partial: it has the
// living buckets' units, not the Listing's (read it again and correct
// it); one whose Claim
// is void is reported as Moved (read it again). A created state
// gets a new Fence generation, is added to the Store's registry and has
// its Ops marked applied (for Retention); its held count is the units of
// the holds the gate still has for it (a state lost alone keeps its holds
// and their records), so their Confirm, Revert or reclaim after the
// rebuild keeps the counts whole. Each SKU is written atomically
// and on its own; the outcomes are in input order. On error some may have
// been applied, and running the same Rebuild again is safe.
func (s *Store) Rebuild(ctx context.Context, rs []Rebuild) (_ []Outcome, err error) {
	defer named(&err, "rebuild", "")
	for i, r := range rs {
		if err := r.Listing.Validate(); err != nil {
			return nil, err
		}
		for j, op := range r.Ops {
			if err := stock.ValidateID("rebuilds["+strconv.Itoa(i)+"].Ops["+strconv.Itoa(j)+"]", op); err != nil {
				return nil, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	skus := skusOf(rs, func(r Rebuild) string { return r.Listing.SKU })
	if !s.bucketed {
		return s.rebuild(ctx, rs)
	}
	bs, err := s.bucketsOf(ctx, skus)
	if err != nil {
		return nil, err
	}
	if err := s.probeBuckets(ctx, skus, bs); err != nil {
		return nil, err
	}
	// SKUs split into buckets one by one, each run of unsplit SKUs
	// between them in one batched call, so the outcomes a failure leaves
	// are those of a prefix of rs, as for an unsplit batch.
	out := make([]Outcome, 0, len(rs))
	for i := 0; i < len(rs); {
		if len(bs[i].names) > 1 {
			o, err := s.rebuildBucketed(ctx, bs[i], rs[i])
			if err != nil {
				return out, err
			}
			out = append(out, o)
			i++
			continue
		}
		j := i + 1
		for j < len(rs) && len(bs[j].names) == 1 {
			j++
		}
		got, err := s.rebuild(ctx, rs[i:j])
		out = append(out, got...)
		if err != nil {
			return out, err
		}
		i = j
	}
	return out, nil
}

// rebuild is Rebuild of valid requests; a bucket's state is rebuilt by its
// name.
func (s *Store) rebuild(ctx context.Context, rs []Rebuild) ([]Outcome, error) {
	all, err := newGens(ctx, len(rs))
	if err != nil {
		return nil, err
	}
	out := make([]Outcome, 0, len(rs))
	for start := 0; start < len(rs); start += snapshotBatch {
		batch := rs[start:min(start+snapshotBatch, len(rs))]
		gens := all[start:]
		now := s.nowMs()
		regs := make([]redis.Cmder, len(batch))
		cmds := make([]*redis.Cmd, len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for i, r := range batch {
				l := r.Listing
				keys := []string{s.stateKey(l.SKU), s.claimKey(l.SKU), s.holdsKey(l.SKU), s.linesKey(l.SKU)}
				for _, op := range r.Ops {
					keys = append(keys, s.opMarkerKey(l.SKU, op))
				}
				keys = append(keys, s.queueKey(l.SKU))
				args := []any{l.Units, l.PerUserLimit, l.EffectiveHoldTTL().Milliseconds(), gens[i],
					s.keep.Milliseconds(), r.Claim, len(r.Ops), l.EffectiveMaxHoldTTL().Milliseconds(), now}
				regs[i] = s.rebuildRegistry(ctx, p, l.SKU)
				cmds[i] = rebuildScript.Run(ctx, p, keys, args...)
			}
		})
		if err := firstErr(regs...); err != nil {
			return out, s.batchErr(ctx, err, start, len(batch))
		}
		s.listed.Store(true)
		for _, c := range cmds {
			res, err := c.Slice()
			if err != nil {
				return out, s.batchErr(ctx, err, start, len(batch))
			}
			code, _ := replyCode(res)
			o, ok := rebuildOutcomes[code]
			if !ok {
				return out, badReply(res)
			}
			out = append(out, o)
		}
	}
	return out, nil
}

var rebuildOutcomes = map[string]Outcome{"ok": Applied, "exists": Exists, "stale": Moved}

// batchErr classifies the failure of a call that writes many SKUs, one
// script each, in pipelines: done writes were applied by earlier pipelines
// and n were in the failed one. The call as a whole may then have been
// applied in part: an unknown outcome once anything may have been written
// (done > 0, or a server's error reply to one of several writes, which says
// nothing of the others). Otherwise it is writeErr's.
func (s *Store) batchErr(ctx context.Context, err error, done, n int) error {
	if layout1(err) {
		return &layoutError{prefix: s.prefix, layout: 1} // refused before any write
	}
	var rerr redis.Error
	if done > 0 || (n > 1 && errors.As(err, &rerr)) {
		return unknown(ctx, err)
	}
	return s.writeErr(ctx, err)
}

// newGens checks that ctx is not done (nothing is sent then) and draws n
// new Fence generations.
func newGens(ctx context.Context, n int) ([]string, error) {
	gens := make([]string, n)
	for i := range gens {
		var err error
		if err = ctx.Err(); err == nil {
			gens[i], err = randomToken()
		}
		if err != nil {
			return nil, notSent(err)
		}
	}
	return gens, nil
}
