package redisstock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// peekBatch is how many SKUs one pipelined peek covers.
const peekBatch = 256

// ReclaimExpired returns the units of at most limit holds whose deadline
// (by the Store's Clock) has passed, and the user quota they counted, and
// reports them. Each hold is returned by one script that re-checks it, so
// any number of reclaimers may run at once: a hold is returned once, and a
// confirmed or reverted hold never. The lines of one order are returned
// together (unless limit ends the pass between them; the next pass returns
// the rest); a line partial reverts emptied ends unreported, and a pass
// reports fewer than limit holds only when no more are due. A pass also
// finishes the orders it ended, deletes the records and entries of orders
// that ended more than Retention ago (nothing else deletes them) and
// settles the directory entries whose check time came: see "Reclaim" and
// "The life of an order" in the package doc. The report survives a
// client's resend of a pass's scripts; an error after holds were returned
// may hide them from the report (the error then matches
// stock.ErrUnknownOutcome), their units are back all the same.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) (out []stock.Reclaimed, err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpReclaim, 0)
	defer func() { tr.Done(err) }()
	defer named(&err, "reclaim expired holds", "")
	var start, oldest time.Time
	var now int64 // the pass's time, ms
	if s.obs.Reclaiming() {
		start = time.Now()
		defer func() { s.obs.PassDone(ctx, "redisstock", start, out, oldest, time.UnixMilli(now), err) }()
	}
	if limit < 1 {
		return nil, &stock.InvalidError{Field: "limit", Reason: strconv.Itoa(limit) + " is below 1"}
	}
	pass, err := randomToken()
	if err != nil {
		return nil, notSent(err)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	now = s.nowMs()
	// The registry, and the directory shards whose ended entries are due
	// for deletion: one round trip.
	var members *redis.StringSliceCmd
	var at *redis.TimeCmd
	dir := s.dir.Load()
	heads := make([]*redis.StringCmd, len(dir.gones))
	opens := make([]*redis.StringSliceCmd, len(dir.opens))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		members = p.SMembers(ctx, s.registryKey())
		for k := range heads {
			heads[k] = p.LIndex(ctx, dir.gones[k], 0)
			opens[k] = p.ZRangeByScore(ctx, dir.opens[k], &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now, 10), Count: peekBatch})
		}
		at = p.Time(ctx)
	})
	skus, err := members.Result()
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	snow, err := serverMs(at) // ended records and entries are due by the server's time
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	skus = slices.DeleteFunc(skus, func(sku string) bool { return isMark(sku) })
	for start, round := 0, 0; start < len(skus) && len(out) < limit; round++ {
		batch := skus[start:min(start+peekBatch, len(skus))]
		due, err := s.peekDue(ctx, batch, now, snow, limit-len(out))
		if err != nil {
			return out, err
		}
		peeked, more := 0, false
		for _, d := range due {
			if len(d.orders) > 0 && (oldest.IsZero() || d.oldest.Before(oldest)) {
				oldest = d.oldest
			}
			peeked += len(d.orders)
			more = more || d.more
		}
		// Each round's scripts record their replies under a token of
		// their own: a SKU read again is a new script call, not a resend.
		got, ended, err := s.reclaimDue(ctx, due, now, pass+"."+strconv.Itoa(round))
		for i := range got {
			got[i].SKU = skuOf(got[i].SKU)
		}
		out = append(out, got...)
		if err != nil {
			return out, err
		}
		if ended == peeked && len(got) == ended && !more {
			start += peekBatch
		}
		// Lines partial reverts had emptied ended with their orders but
		// are not reported, and holds that ended between the peek and
		// the script (a Confirm, a Revert, another reclaimer) are not
		// returned: both took part of the budget, so peek the same SKUs
		// again (they are out of the holds zsets now, or no longer due:
		// every round makes progress). So do SKUs every entry of whose
		// hold queue's head the peek read was one to take off: the scripts
		// took more off, the due ones into the holds zsets.
	}
	// Last, the open entries whose check time came, then the directory
	// entries past their retention (the pass's own endings are not due
	// yet).
	err = s.checkOpen(ctx, dir, opens, now)
	if err == nil {
		err = s.purgeDirs(ctx, dir, heads, snow)
	}
	if err != nil && len(out) > 0 {
		err = &outcomeError{err: err}
	}
	return out, err
}

// dueHolds are the order IDs of one SKU whose deadline has passed, and
// those a reclaim pass ended a line of but did not finish (see endsGrace).
type dueHolds struct {
	sku    string
	orders []string
	oldest time.Time // the earliest deadline of orders
	left   []string  // unfinished ends
	purge  bool      // ended records are due for deletion
	queued bool      // the SKU's hold queue's head has entries of ended or due holds for the script to take off
	more   bool      // every entry of the queue's head the peek read was one: more may follow
}

// queueBatch is how many hold queue entries of ended holds one reclaim
// script takes off the queue's head besides the due ones.
const queueBatch = 256

// queuePeek is how many entries of a SKU's hold queue a peek reads: when
// the script is to take every one off, the pass peeks the SKU again, and
// finds the due ones past them in the holds zset, where the script put
// them as it took the head off.
const queuePeek = 32

// queuePeekScript reads a hold queue's head; see the header of
// lua/stock_queue_peek.lua.
var queuePeekScript = redis.NewScript(lua.Script("stock_queue_peek.lua"))

func init() { allScripts = append(allScripts, queuePeekScript) }

// endsGrace is how long an order stays in a SKU's ends zset before a pass
// other than the one that put it there finishes it: that pass is likely
// still running (finishing twice is harmless, only wasted).
const endsGrace = time.Minute

// peekDue lists, in one round trip, up to budget due holds across skus
// (by now, the Store's clock), and marks the SKUs with ended records due
// for deletion (by snow, the server's).
func (s *Store) peekDue(ctx context.Context, skus []string, now, snow int64, budget int) ([]dueHolds, error) {
	var cmds, lefts []*redis.ZSliceCmd
	var gones []*redis.StringCmd
	var queues []*redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, sku := range skus {
			gones = append(gones, p.LIndex(ctx, s.goneKey(sku), 0))
			cmds = append(cmds, p.ZRangeByScoreWithScores(ctx, s.holdsKey(sku), &redis.ZRangeBy{
				Min: "-inf", Max: strconv.FormatInt(now, 10), Count: int64(budget),
			}))
			queues = append(queues, queuePeekScript.Run(ctx, p, []string{s.queueKey(sku), s.linesKey(sku), s.holdsKey(sku)},
				now, min(max(budget, 1), queuePeek)))
			lefts = append(lefts, p.ZRangeByScoreWithScores(ctx, s.endsKey(sku), &redis.ZRangeBy{
				Min: "-inf", Max: strconv.FormatInt(now-endsGrace.Milliseconds(), 10), Count: peekBatch,
			}))
		}
	})
	var due []dueHolds
	for i, c := range cmds {
		zs, err := c.Result()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		ls, err := lefts[i].Result()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		purge, err := goneDue(gones[i], snow)
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		qs, err := queues[i].Slice()
		if err != nil {
			return nil, s.readErr(ctx, err)
		}
		if len(qs) < 2 || len(qs)%2 != 0 {
			return nil, badReply(qs)
		}
		work, ok1 := qs[0].(int64)
		more, ok2 := qs[1].(int64)
		if !ok1 || !ok2 {
			return nil, badReply(qs)
		}
		if len(ls) > 0 || purge {
			d := dueHolds{sku: skus[i], purge: purge}
			for _, z := range ls {
				id, _ := z.Member.(string)
				d.left = append(d.left, id)
			}
			due = append(due, d)
		}
		d := dueHolds{sku: skus[i], queued: work == 1, more: more == 1}
		var oldest int64
		for _, z := range zs[:min(len(zs), budget)] {
			id, _ := z.Member.(string)
			d.orders = append(d.orders, id)
			if len(d.orders) == 1 {
				oldest = int64(z.Score)
			}
		}
		// The queue's due holds, held there only.
		for j := 2; j < len(qs); j += 2 {
			id, ok1 := qs[j].(string)
			at, ok2 := qs[j+1].(string)
			dl, err := strconv.ParseInt(at, 10, 64)
			if !ok1 || !ok2 || err != nil {
				return nil, badReply(qs)
			}
			if len(d.orders) >= budget {
				d.more = false
				break
			}
			d.orders = append(d.orders, id)
			if len(d.orders) == 1 || dl < oldest {
				oldest = dl
			}
		}
		budget -= len(d.orders)
		if len(d.orders) > 0 {
			d.oldest = time.UnixMilli(oldest)
		}
		if len(d.orders) > 0 || d.queued {
			due = append(due, d)
		}
	}
	return due, nil
}

// memoTTL is how long a reclaim pass's reply is kept for a resend.
const memoTTL = time.Minute

// reclaimDue runs the reclaim script for every SKU in due, in one round
// trip, then ends the directory entries of the orders it ended. It also
// reports how many lines it ended: those it returns, and those partial
// reverts had emptied (ended, not reported).
func (s *Store) reclaimDue(ctx context.Context, due []dueHolds, now int64, pass string) ([]stock.Reclaimed, int, error) {
	if len(due) == 0 {
		return nil, 0, nil
	}
	cmds := make([]*redis.Cmd, len(due))
	purges := make([]*redis.Cmd, len(due))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, d := range due {
			if d.purge {
				// The SKU's line records whose retention has passed.
				purges[i] = purgeScript.Run(ctx, p, []string{s.linesKey(d.sku), s.goneKey(d.sku)}, purgeBatch, "line")
			}
			if len(d.orders) == 0 && !d.queued {
				continue // unfinished ends, or records to delete, only
			}
			keys := []string{s.stateKey(d.sku), s.holdsKey(d.sku), s.usersKey(d.sku), s.skuKey(d.sku, ":rc:", pass),
				s.endsKey(d.sku), s.linesKey(d.sku), s.goneKey(d.sku), s.queueKey(d.sku)}
			args := make([]any, 0, 4+len(d.orders))
			args = append(args, now, s.keep.Milliseconds(), memoTTL.Milliseconds(), len(d.orders)+queueBatch)
			for _, id := range d.orders {
				args = append(args, id)
			}
			cmds[i] = reclaimScript.Run(ctx, p, keys, args...)
		}
	})
	var out, ended []stock.Reclaimed // ended: every line ended, emptied ones too
	var idents []string
	var firstErr error
	for _, c := range purges {
		if c != nil && c.Err() != nil && firstErr == nil {
			firstErr = s.writeErr(ctx, c.Err())
		}
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		res, err := c.Slice()
		if err != nil {
			if firstErr == nil {
				firstErr = s.writeErr(ctx, err)
			}
			continue
		}
		if len(res)%4 != 0 {
			return out, 0, &outcomeError{err: badReply(res)}
		}
		for j := 0; j < len(res); j += 4 {
			id, ok1 := res[j].(string)
			user, ok2 := res[j+1].(string)
			q, ok3 := res[j+2].(string)
			ident, ok4 := res[j+3].(string)
			qty, err := strconv.ParseInt(q, 10, 64)
			if !ok1 || !ok2 || !ok3 || !ok4 || err != nil {
				return out, 0, &outcomeError{err: badReply(res)}
			}
			r := stock.Reclaimed{OrderID: id, UserID: user, SKU: due[i].sku, Qty: qty}
			if qty > 0 {
				// A line partial reverts emptied ends with its order but
				// returns nothing: it is not reported.
				out = append(out, r)
			}
			ended = append(ended, r)
			idents = append(idents, ident)
		}
	}
	n := len(ended)
	left, leftIdents, err := s.unfinished(ctx, due)
	if err != nil {
		if n > 0 {
			// This pass's scripts ended lines: an error now follows writes.
			err = &outcomeError{err: err}
		}
		return out, n, errors.Join(firstErr, err)
	}
	ended, idents = append(ended, left...), append(idents, leftIdents...)
	if err := s.endOrders(ctx, ended, idents, now); err != nil {
		return out, n, errors.Join(firstErr, err)
	}
	// Finished: the orders leave their SKUs' ends zsets.
	refs := make([]endsRef, len(ended))
	for i, l := range ended {
		refs[i] = endsRef{l.SKU, endsMember(l.OrderID, idents[i])}
	}
	if err := s.dropEnds(ctx, refs); err != nil && firstErr == nil {
		firstErr = err
	}
	return out, n, firstErr
}

// endsMember is an order's member in a SKU's ends zset: its ID and the
// identity of the line the reclaimer ended, so that finishing it never
// touches a newer order under the same ID.
func endsMember(order, ident string) string { return order + "\n" + ident }

// endsRef is one member of one SKU's ends zset.
type endsRef struct{ sku, member string }

// dropEnds takes refs out of their SKUs' ends zsets.
func (s *Store) dropEnds(ctx context.Context, refs []endsRef) error {
	if len(refs) == 0 {
		return nil
	}
	var zrems []*redis.IntCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, r := range refs {
			zrems = append(zrems, p.ZRem(ctx, s.endsKey(r.sku), r.member))
		}
	})
	return s.writeErr(ctx, errOf(zrems))
}

// unfinished returns the orders in due's unfinished ends that are still
// the orders the reclaimer ended (see Reclaim in the package doc), as
// lines (and their identities) for endOrders; the others leave the ends
// zset at once.
func (s *Store) unfinished(ctx context.Context, due []dueHolds) ([]stock.Reclaimed, []string, error) {
	type left struct {
		sku, id, ident string
		rec, dir       *redis.StringCmd
	}
	var ls []left
	var drop []endsRef // members that are not the order the reclaimer ended
	for _, d := range due {
		for _, m := range d.left {
			id, ident, ok := strings.Cut(m, "\n")
			if !ok {
				drop = append(drop, endsRef{d.sku, m})
				continue
			}
			ls = append(ls, left{sku: d.sku, id: id, ident: ident})
		}
	}
	if len(ls) == 0 {
		return nil, nil, s.dropEnds(ctx, drop)
	}
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i := range ls {
			ls[i].rec = p.HGet(ctx, s.linesKey(ls[i].sku), ls[i].id)
			ls[i].dir = p.HGet(ctx, s.dirKey(ls[i].id), ls[i].id)
		}
		at = p.Time(ctx)
	})
	now, err := serverMs(at) // the ends of records and entries are the server's time
	if err != nil {
		return nil, nil, s.readErr(ctx, err)
	}
	var lines []stock.Reclaimed
	var idents []string
	for _, l := range ls {
		rv, err := l.rec.Result()
		if err != nil && err != redis.Nil {
			return nil, nil, s.readErr(ctx, err)
		}
		dv, err := l.dir.Result()
		if err != nil && err != redis.Nil {
			return nil, nil, s.readErr(ctx, err)
		}
		rec, recOK, err := parseRecord(rv, now)
		if err != nil {
			return nil, nil, badReply(rv)
		}
		dir, dirOK, err := parseEntry(dv, now)
		if err != nil {
			return nil, nil, badReply(dv)
		}
		mine := recOK && rec.st == "expired" && rec.ident == l.ident ||
			!recOK && dirOK && dir.ident == l.ident && dir.e == 0
		if mine {
			lines, idents = append(lines, stock.Reclaimed{OrderID: l.id, SKU: l.sku}), append(idents, l.ident)
		} else {
			drop = append(drop, endsRef{l.sku, endsMember(l.id, l.ident)})
		}
	}
	return lines, idents, s.dropEnds(ctx, drop)
}

// endOrders ends the orders of the lines this pass returned on their other
// slots, and then their directory entries (see Reclaim in the package doc):
// a line confirmed on another slot, half of a multi-slot Confirm that
// stopped, is expired too (unreported: it was not a hold); left confirmed,
// it would count as sold units the record never sold. A line still held
// (an extension that reached only its slot) keeps its hold, and its
// order's entry waits for the pass that returns it.
func (s *Store) endOrders(ctx context.Context, lines []stock.Reclaimed, idents []string, now int64) error {
	if len(lines) == 0 {
		return nil
	}
	type order struct{ id, ident string }
	ended := map[order]map[string]bool{} // order -> SKUs returned now
	var orders []order
	for i, l := range lines {
		o := order{l.OrderID, idents[i]}
		if ended[o] == nil {
			ended[o] = map[string]bool{}
			orders = append(orders, o)
		}
		ended[o][l.SKU] = true
	}
	// The other lines of multi-line orders: still held, or confirmed?
	type other struct {
		o   order
		sku string
		cmd *redis.StringCmd
	}
	var others []other
	items := map[order][]stock.Item{}
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		at = p.Time(ctx)
		for _, o := range orders {
			its, err := parseIdent(o.ident)
			if err != nil {
				continue
			}
			items[o] = its
			for _, it := range its {
				if !ended[o][it.SKU] {
					others = append(others, other{o, it.SKU, p.HGet(ctx, s.linesKey(it.SKU), o.id)})
				}
			}
		}
	})
	live := map[order]bool{}
	sold := map[order]map[string]bool{} // order -> SKUs confirmed on other slots
	snow, err := serverMs(at)           // records' ends are the server's time
	if err != nil {
		return s.writeErr(ctx, err)
	}
	for _, x := range others {
		v, err := x.cmd.Result()
		if err != nil && err != redis.Nil {
			return s.writeErr(ctx, err)
		}
		r, ok, err := parseRecord(v, snow)
		if err != nil {
			return &outcomeError{err: badReply(v)}
		}
		if !ok || r.ident != x.o.ident {
			continue
		}
		switch r.st {
		case "held":
			live[x.o] = true
		case "confirmed":
			if sold[x.o] == nil {
				sold[x.o] = map[string]bool{}
			}
			sold[x.o][x.sku] = true
		}
	}
	var cmds []*redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, o := range orders {
			if sold[o] != nil {
				for _, g := range s.groups(items[o]) {
					if slices.ContainsFunc(g, func(it stock.Item) bool { return sold[o][it.SKU] }) {
						cmds = append(cmds, s.release(ctx, p, o.id, o.ident, g, now, "expire", ""))
					}
				}
			}
			if !live[o] {
				cmds = append(cmds, s.endDirectory(ctx, p, o.id, o.ident))
			}
		}
	})
	return s.writeErr(ctx, errOf(cmds))
}

// Hold is one live hold of a SKU: an order line neither confirmed nor
// returned yet.
type Hold struct {
	OrderID  string
	UserID   string
	SKU      string
	Qty      int64
	Deadline time.Time
}

// HeldOrders lists the SKU's live holds (including those past their
// deadline that no reclaimer has returned yet), in deadline order, in two
// round trips. A hold's Qty is what it still holds: its line less what
// partial reverts gave back; a line they emptied is not listed. A reconciler uses it to find holds the database has not
// recorded. The list is a snapshot: holds may change while it is read.
func (s *Store) HeldOrders(ctx context.Context, sku string) (_ []Hold, err error) {
	defer named(&err, "read held orders of SKU", sku)
	if err := stock.ValidateID("sku", sku); err != nil {
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	b, err := s.splitSKU(ctx, sku)
	if err != nil {
		return nil, err
	}
	names := []string{sku}
	if b != nil {
		names = b.names
	}
	var out []Hold
	for _, name := range names {
		hs, err := s.heldOrders(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, hs...)
	}
	for i := range out {
		out[i].SKU = sku
	}
	slices.SortStableFunc(out, func(a, b Hold) int { return a.Deadline.Compare(b.Deadline) })
	return out, nil
}

// heldOrders is HeldOrders of one gate state (a SKU, or one of its
// buckets): the holds of its holds zset and of its hold queue (there, at
// their records' deadlines; a hold whose deadline moved is in both).
func (s *Store) heldOrders(ctx context.Context, sku string) ([]Hold, error) {
	var zc *redis.ZSliceCmd
	var qc *redis.StringSliceCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		// The queue first: a hold only ever moves from the queue into the
		// zset (a reclaim pass, ExtendHold), and other clients' commands
		// may run between the two reads, so a hold live throughout is in
		// at least one of them as read.
		qc = p.LRange(ctx, s.queueKey(sku), 0, -1)
		zc = p.ZRangeWithScores(ctx, s.holdsKey(sku), 0, -1)
	})
	zs, err := zc.Result()
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	qs, err := qc.Result()
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	ids := make([]string, 0, len(zs)+len(qs))
	dls := make([]int64, 0, len(zs)+len(qs)) // -1: the record's
	seen := make(map[string]bool, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		ids, dls = append(ids, id), append(dls, int64(z.Score))
		seen[id] = true
	}
	for _, e := range qs {
		_, id, ok := strings.Cut(e, " ")
		if !ok {
			return nil, badReply(e)
		}
		if !seen[id] {
			ids, dls = append(ids, id), append(dls, -1)
			seen[id] = true
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.c.HMGet(ctx, s.linesKey(sku), ids...).Result()
	if err != nil {
		return nil, s.readErr(ctx, err)
	}
	out := make([]Hold, 0, len(ids))
	for i, v := range vals {
		r, ok, err := parseRecord(v, 0)
		if err != nil {
			return nil, badReply(v)
		}
		if !ok || r.st != "held" {
			continue
		}
		if r.left() == 0 {
			continue // partial reverts gave it all back: it holds nothing
		}
		dl := dls[i]
		if dl < 0 {
			dl = r.dl
		}
		out = append(out, Hold{OrderID: ids[i], UserID: r.user(), SKU: sku, Qty: r.left(), Deadline: time.UnixMilli(dl)})
	}
	return out, nil
}
