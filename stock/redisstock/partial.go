package redisstock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

var (
	_ stock.PartialReverter = (*Store)(nil)
	_ stock.HoldExtender    = (*Store)(nil)
)

// The scripts of partial returns and hold extensions; see their headers in
// package lua.
var (
	returnScript     = redis.NewScript(lua.Script("stock_return.lua"))
	returnLockScript = redis.NewScript(lua.Script("stock_return_lock.lua"))
	extendScript     = redis.NewScript(lua.Script("stock_extend.lua"))
)

// They run in pipelines, so a server that lacks them gets them loaded (see
// pipelined).
func init() { allScripts = append(allScripts, returnScript, returnLockScript, extendScript) }

// ReturnLease is how long a partial return of an order on several slots of
// a Redis Cluster keeps the order's return lock while it reads and checks
// the lines; once its applies are sent, the lock is kept until the call
// (or its retry, or the next return ReturnLease after the applies began)
// completes it. See "Partial reverts and hold extensions" in the package
// doc.
const ReturnLease = 30 * time.Second

// RevertItems implements stock.PartialReverter. It costs a read of the
// order's directory entry and one script call over the order's lines on a
// client without hash slots, or on a Cluster when they share a slot:
// checked and applied in one atomic step, all or nothing. Each line record
// counts the units given back and remembers the operation ID with the
// return's items for as long as the record lives. An order on several
// slots of a Cluster (or a Ring) is checked whole under its return lock
// (another return meanwhile is stock.ErrContention), then applied slot
// group by slot group, each group atomic and applied once per operation
// ID: after stock.ErrUnknownOutcome, the retry (same r) applies the rest.
// See "Partial reverts and hold extensions" in the package doc.
func (s *Store) RevertItems(ctx context.Context, r stock.Return) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpRevertItems, len(r.Items))
	defer func() { tr.Done(err) }()
	defer named(&err, "revert items of order", r.OrderID)
	defer func() { err = publicErr(err) }()
	if err := r.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	items := canon.Sorted(r.Items)
	rt := &giveBack{op: r.OpID, order: r.OrderID, items: items, sig: canon.Signature(items)}
	ident, groups, err := s.lookup(ctx, r.OrderID)
	if err != nil {
		return err
	}
	rt.ident, rt.now = ident, s.nowMs()
	if s.bucketed {
		rt.toBuckets(groups)
	}
	if len(groups) == 1 {
		return s.returnOne(ctx, rt, groups[0])
	}
	return s.returnSlots(ctx, rt, groups)
}

// giveBack is one RevertItems call.
type giveBack struct {
	op, order, ident, sig string
	items                 []stock.Item // sorted by SKU
	now                   int64
	// begun: complete the return only if it was applied to a line of the
	// order (rollForward; the lock outlives the order's records, and an
	// order reusing the ID never had it applied).
	begun bool
}

// args are the arguments of stock_return.lua after now and the order ID,
// for the return's lines within g (indexes into g).
func (rt *giveBack) args(s *Store, g []stock.Item, mode string, lines []stock.Item) []any {
	args := []any{rt.ident, s.keep.Milliseconds(), rt.op, rt.sig, mode, len(lines)}
	for _, it := range lines {
		at := slices.IndexFunc(g, func(l stock.Item) bool { return l.SKU == it.SKU }) + 1
		args = append(args, at, it.Qty)
	}
	return args
}

// returnOne returns part of an order whose lines share one server or slot:
// one script checks and applies it all.
func (s *Store) returnOne(ctx context.Context, rt *giveBack, g []stock.Item) error {
	var cmd *redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) { // as Confirm's
		s.openEntry(ctx, p, rt.order, rt.now+endsGrace.Milliseconds())
		cmd = s.lineScript(ctx, p, returnScript, rt.order, g, rt.now, rt.args(s, g, "all", rt.items)...)
	})
	res, err := cmd.Slice()
	if err != nil {
		return s.writeErr(ctx, err)
	}
	code, n := replyCode(res)
	switch code {
	case "ok", "dup":
		if n == 1 {
			return s.endEntry(ctx, rt.order, rt.ident)
		}
		return nil
	case "exceeds":
		if n >= 1 && int(n) <= len(rt.items) {
			return &stock.SKUError{SKU: rt.items[n-1].SKU, Err: stock.ErrExceedsOrder}
		}
	case "unavailable":
		if n >= 1 && int(n) <= len(g) {
			return lineErr(code, g[n-1].SKU)
		}
	default:
		if err := rt.refusal(code); err != nil {
			return err
		}
	}
	return badReply(res)
}

// refusal maps an order-wide refusal code of stock_return.lua to its
// error, or nil for another code.
func (rt *giveBack) refusal(code string) error {
	err := orderCodes[code]
	if code == "conflict" {
		err = fmt.Errorf("%w: return %s was applied with other items", stock.ErrConflict, strconv.Quote(rt.op))
	}
	if err == nil {
		return nil
	}
	return orderErr(rt.order, err)
}

// returnSlots returns part of an order on several slots: under the
// order's return lock, every line is read and checked, then each slot
// group that has something to do applies its part, in one pipeline.
func (s *Store) returnSlots(ctx context.Context, rt *giveBack, groups [][]stock.Item) error {
	holder, err := s.takeLock(ctx, rt, ReturnLease, rt.op)
	if err != nil {
		return err
	}
	if holder != "" {
		// Another return holds the lock. One that began applying more
		// than a lease ago has failed midway (or only failed to give the
		// lock up): complete it, as its retry would, then run this one.
		if !s.rollForward(ctx, rt, groups, holder) {
			return rt.contention()
		}
		if holder, err = s.takeLock(ctx, rt, ReturnLease, rt.op); err != nil {
			return err
		}
		if holder != "" {
			return rt.contention()
		}
	}
	return s.returnLocked(ctx, rt, groups)
}

func (rt *giveBack) contention() error {
	return fmt.Errorf("%w: another return of the order is running", stock.ErrContention)
}

// takeLock takes (or renews) the order's return lock for rt's operation
// for lease, storing value; it returns the lock's value when another
// return holds it ("" when taken).
func (s *Store) takeLock(ctx context.Context, rt *giveBack, lease time.Duration, value string) (string, error) {
	res, err := returnLockScript.Run(ctx, s.c, s.dirKeys(rt.order)[:1], rt.order, rt.op, lease.Milliseconds(), value).Result()
	if err != nil {
		return "", s.writeErr(ctx, err)
	}
	switch v := res.(type) {
	case int64:
		if v == 1 {
			return "", nil
		}
	case string:
		if v != "" {
			return v, nil
		}
	}
	return "", badReply(res)
}

// applying is the lock's value while rt's applies are sent: its operation
// ID, its signature (so that a later return can complete it) and when it
// began, ms.
func (rt *giveBack) applying(now int64) string {
	return rt.op + "\n" + rt.sig + "\n" + strconv.FormatInt(now, 10)
}

// rollForward completes the return named by holder, the value of the
// lock another return holds, if it began applying more than ReturnLease
// ago (a live call is done by then: it failed, its retry not come, or it
// could not give the lock up), and only where it was applied to a line of
// the order (the lock outlives the order's records: an order that reuses
// the ID never had it applied; one it was applied to nowhere leaves nothing
// to complete, and its own retry runs it whole). It reports whether the
// lock is free for rt now: that return completed, or was refused.
func (s *Store) rollForward(ctx context.Context, rt *giveBack, groups [][]stock.Item, holder string) bool {
	op, rest, ok1 := strings.Cut(holder, "\n")
	sig, at, ok2 := strings.Cut(rest, "\n")
	began, err := strconv.ParseInt(at, 10, 64)
	if !ok1 || !ok2 || err != nil || rt.now-began <= ReturnLease.Milliseconds() {
		return false
	}
	items, err := parseIdent("\n" + sig)
	if err != nil {
		return false
	}
	prev := &giveBack{op: op, order: rt.order, ident: rt.ident, sig: sig, items: items, now: rt.now, begun: true}
	if h, err := s.takeLock(ctx, prev, ReturnLease, prev.op); err != nil || h != "" {
		return false
	}
	err = s.returnLocked(ctx, prev, groups)
	return err == nil || stock.IsBusiness(err) && !errors.Is(err, stock.ErrUnknownOutcome)
}

// returnLocked is returnSlots under the order's return lock, taken for
// rt's operation.
func (s *Store) returnLocked(ctx context.Context, rt *giveBack, groups [][]stock.Item) error {
	unlock := func(cause error) error {
		// The lock only keeps other returns out while this one runs: if
		// giving it up fails, its lease (or the entry's end) ends it.
		_ = returnLockScript.Run(ctx, s.c, s.dirKeys(rt.order)[:1], rt.order, rt.op, 0).Err()
		return cause
	}
	lines, err := s.readLines(ctx, rt.order, groups, rt.op)
	if err != nil {
		return unlock(err)
	}
	if rt.begun && !slices.ContainsFunc(lines, func(l lineState) bool { return l.done != "" }) {
		return unlock(nil) // applied nowhere: nothing to complete
	}
	plan, err := rt.plan(lines, len(groups))
	if err != nil || plan == nil {
		return unlock(err)
	}
	mode := "part"
	if plan.close {
		mode = "close"
	}
	type sent struct {
		g   int
		cmd *redis.Cmd
	}
	var cmds []sent
	if len(plan.run) > 0 {
		// From here some groups may be applied and others not: the lock
		// must outlive any chance of another return of the order, so that
		// none checks the lines this one has not reached yet (it would be
		// applied, and this one's retry would then give back less than it
		// asked, both told nil): it lives as long as the order's entry.
		// Taking it again also tells a call whose lease ran out since its
		// check (another return may have run).
		holder, err := s.takeLock(ctx, rt, ReturnLease, rt.applying(s.nowMs()))
		if err != nil {
			return err // nothing applied: the retry takes the lock again
		}
		if holder != "" {
			return rt.contention()
		}
		s.pipelined(ctx, func(p redis.Pipeliner) {
			for _, gi := range plan.run {
				g := groups[gi]
				cmds = append(cmds, sent{gi, s.lineScript(ctx, p, returnScript, rt.order, g, rt.now,
					rt.args(s, g, mode, plan.lines[gi])...)})
			}
			s.openEntry(ctx, p, rt.order, rt.now+endsGrace.Milliseconds()) // a Cluster's: its own master
		})
	}
	ended := plan.ended
	for _, c := range cmds {
		res, err := c.cmd.Slice()
		if err != nil {
			err = s.writeErr(ctx, err)
			if len(cmds) == 1 && !errors.Is(err, stock.ErrUnknownOutcome) {
				return unlock(err) // refused for certain, and nothing else sent
			}
			if !errors.Is(err, stock.ErrUnknownOutcome) {
				err = &outcomeError{err: err}
			}
			return err // the lock stays for the retry
		}
		code, n := replyCode(res)
		if code != "ok" && code != "dup" {
			// Only a race with the end of the order's records, or a SKU
			// state lost meanwhile, gets here.
			cause := rt.refusal(code)
			if g := groups[c.g]; cause == nil && code == "unavailable" && n >= 1 && int(n) <= len(g) {
				cause = lineErr(code, g[n-1].SKU)
			}
			if cause == nil {
				cause = badReply(res)
			}
			if len(cmds) == 1 {
				return unlock(cause)
			}
			return &outcomeError{err: detached(cause)}
		}
		ended[c.g] = n == 1
	}
	if slices.Contains(ended, false) {
		return unlock(nil)
	}
	return unlock(s.endEntry(ctx, rt.order, rt.ident))
}

// returnPlan is what a return of an order on several slots does after its
// checks: the groups to run (with their lines of the return), whether it
// ends the order, and which groups are ended already.
type returnPlan struct {
	run   []int
	lines [][]stock.Item // per group: the return's lines in it
	close bool
	ended []bool
}

// plan checks a return against every line of its order, in memstock's
// order: a missing line (stock.ErrUnknownOrder), the operation applied
// already (nil: the retry applies the groups it did not reach; other items
// are stock.ErrConflict), an expired hold, a closed order, a line that
// asks too much or names a SKU the order lacks, a SKU whose state is gone.
// A nil plan with a nil error means there is nothing left to do.
func (rt *giveBack) plan(lines []lineState, groups int) (*returnPlan, error) {
	applied := make([]bool, groups)
	repeat := false
	for _, l := range lines {
		if !l.of(rt.ident) {
			return nil, orderErr(rt.order, stock.ErrUnknownOrder)
		}
		if l.done != "" {
			if l.done != rt.sig {
				return nil, rt.refusal("conflict")
			}
			applied[l.group], repeat = true, true
		}
	}
	switch {
	case repeat:
	case slices.ContainsFunc(lines, func(l lineState) bool { return l.st == "expired" || (l.st == "held" && l.dl <= rt.now) }):
		return nil, orderErr(rt.order, stock.ErrHoldExpired)
	case slices.ContainsFunc(lines, func(l lineState) bool { return l.st == "reverted" || l.st == "refunded" }):
		return nil, orderErr(rt.order, stock.ErrOrderClosed)
	}
	p := &returnPlan{lines: make([][]stock.Item, groups), ended: make([]bool, groups)}
	left := int64(0)
	for _, l := range lines {
		left += l.qty - l.ret
	}
	for _, it := range rt.items {
		var line *lineState
		if i := slices.IndexFunc(lines, func(l lineState) bool { return l.sku == it.SKU }); i >= 0 {
			line = &lines[i]
		}
		switch {
		case line == nil || !repeat && it.Qty > line.qty-line.ret:
			return nil, &stock.SKUError{SKU: it.SKU, Err: stock.ErrExceedsOrder}
		case applied[line.group]:
			continue // given back already (ret counts it)
		case !line.live && (line.st == "held" || line.st == "confirmed"):
			return nil, &stock.SKUError{SKU: it.SKU, Err: stock.ErrUnavailable}
		}
		p.lines[line.group] = append(p.lines[line.group], it)
		left -= min(it.Qty, line.qty-line.ret)
	}
	p.close = left <= 0
	for gi := range groups {
		// Expired, reverted and refunded lines have ended.
		p.ended[gi] = !slices.ContainsFunc(lines, func(l lineState) bool { return l.group == gi && (l.st == "held" || l.st == "confirmed") })
		if !applied[gi] && (len(p.lines[gi]) > 0 || p.close) {
			p.run = append(p.run, gi)
		}
	}
	if repeat && len(p.run) == 0 && !p.close {
		return nil, nil
	}
	return p, nil
}
