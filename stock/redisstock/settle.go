package redisstock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Confirm makes a held order's sale final, all lines or none. After the
// deadline it returns every line's units at once and reports
// stock.ErrHoldExpired. A confirmed order confirms again with nil. A line
// whose SKU state the gate lost fails the call with stock.ErrUnavailable
// before anything is written.
func (s *Store) Confirm(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpConfirm, 0)
	defer func() { tr.Done(err) }()
	defer named(&err, "confirm order", orderID)
	defer func() { err = publicErr(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	ident, groups, err := s.lookup(ctx, orderID)
	if err != nil {
		return err
	}
	now := s.nowMs()
	if len(groups) > 1 {
		// Across slots the confirm scripts cannot be one atomic step: first
		// read every line, so an order that cannot be confirmed is refused
		// (or expired) before any line is. An order confirmed already (a
		// retry) is confirmed again: its lines' ends move with the entry's
		// (see "ending" in The life of an order, package doc).
		if err := s.precheck(ctx, orderID, ident, groups, now); err != nil {
			return err
		}
	}
	// Group by group; the last call carries every group again. The entry
	// ends once every line answered confirmed (see "ending" in The life of
	// an order, package doc).
	for i := range groups {
		last, batch := i == len(groups)-1, groups[i:i+1]
		if last {
			batch = groups
		}
		cmds := make([]*redis.Cmd, len(batch))
		s.pipelined(ctx, func(p redis.Pipeliner) {
			if last {
				s.openEntry(ctx, p, orderID, now+endsGrace.Milliseconds())
			}
			for j, g := range batch {
				cmds[j] = s.lineScript(ctx, p, confirmScript, orderID, g, now, ident, s.keep.Milliseconds())
			}
		})
		for j, cmd := range cmds {
			if err := s.confirmed(ctx, orderID, ident, groups, batch[j], cmd, now, i+j > 0); err != nil {
				return err
			}
		}
	}
	return s.endEntry(ctx, orderID, ident)
}

// confirmed reads the reply of group g's confirm script: nil when its
// lines are confirmed, else the Confirm's outcome (after expiring or
// returning every line where the group cannot be confirmed); others: other
// groups may be confirmed already.
func (s *Store) confirmed(ctx context.Context, orderID, ident string, groups [][]stock.Item, g []stock.Item, cmd *redis.Cmd, now int64, others bool) error {
	res, err := cmd.Slice()
	if err != nil {
		// Groups before this one may be confirmed: the caller retries and
		// the retry confirms the rest, or expires them all. Even a certain
		// refusal of this group leaves them confirmed.
		err = s.writeErr(ctx, err)
		if others && !errors.Is(err, stock.ErrUnknownOutcome) {
			return &outcomeError{err: err}
		}
		return err
	}
	code, n := replyCode(res)
	switch {
	case code == "ok":
		return nil
	case code == "expired":
		return s.settleAll(ctx, orderID, ident, groups, now, "expire",
			&stock.SKUError{SKU: g[0].SKU, Err: stock.ErrHoldExpired})
	case code == "unavailable" && n >= 1 && int(n) <= len(g):
		// Nothing written by this group; the order still holds stock, so
		// its directory entry keeps no end.
		err := lineErr(code, g[n-1].SKU)
		if perr := s.keepDirectory(ctx, orderID); perr != nil {
			err = errors.Join(detached(err), perr)
		}
		if others {
			return &outcomeError{err: detached(err)}
		}
		return err
	case n >= 1 && int(n) <= len(g) && lineErr(code, g[n-1].SKU) != nil:
		// Only a race with Revert (closed), or a record gone past its
		// retention (unknown), gets here with earlier groups confirmed.
		mode := "revert"
		if code == "unknown" {
			mode = "expire"
		}
		if !others {
			return lineErr(code, g[n-1].SKU)
		}
		return s.settleAll(ctx, orderID, ident, groups, now, mode, lineErr(code, g[n-1].SKU))
	}
	return badReply(res)
}

// precheck reads every line record of a multi-slot order. It returns the
// outcome when the order cannot be confirmed, and nil when every line is
// held and live, or confirmed.
func (s *Store) precheck(ctx context.Context, orderID, ident string, groups [][]stock.Item, now int64) error {
	lines, err := s.readLines(ctx, orderID, groups, "")
	if err != nil {
		return err
	}
	expired, lost := "", ""
	for _, l := range lines {
		if l.st == "held" && !l.live && lost == "" {
			lost = l.sku
		}
		switch {
		case !l.of(ident):
			return &stock.SKUError{SKU: l.sku, Err: stock.ErrUnknownOrder}
		case l.st == "reverted" || l.st == "refunded":
			return &stock.SKUError{SKU: l.sku, Err: stock.ErrOrderClosed}
		case l.st == "expired" || (l.st == "held" && l.dl <= now):
			if expired == "" {
				expired = l.sku
			}
		}
	}
	if lost != "" {
		return &stock.SKUError{SKU: lost, Err: stock.ErrUnavailable}
	}
	if expired != "" {
		return s.settleAll(ctx, orderID, ident, groups, now, "expire",
			&stock.SKUError{SKU: expired, Err: stock.ErrHoldExpired})
	}
	return nil
}

// settleAll runs the release script in mode on every group, so a multi-slot
// order whose confirm failed ends with every line returned, and returns
// cause (joined with the release's own failure).
func (s *Store) settleAll(ctx context.Context, orderID, ident string, groups [][]stock.Item, now int64, mode string, cause error) error {
	if len(groups) == 1 && mode == "expire" {
		// The confirm script has expired its own group: only the entry is
		// left to end. Should that fail, the reclaimer ends it (its member
		// is in the open zset); the order's outcome is cause either way.
		_ = s.endEntry(ctx, orderID, ident)
		return cause
	}
	cmds := make([]*redis.Cmd, len(groups))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, g := range groups {
			cmds[i] = s.release(ctx, p, orderID, ident, g, now, mode, "")
		}
		s.endDirectory(ctx, p, orderID, ident)
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return fmt.Errorf("%w (returning the other lines failed: %w)", cause, s.writeErr(ctx, err))
		}
	}
	return cause
}

// Revert returns what the order took, and the user's quota, once: a held
// order is cancelled, a confirmed one refunded, a held one past its deadline
// expired. A repeated revert returns nil and changes nothing; an order with
// no record gets stock.ErrUnknownOrder. A line whose SKU state the gate
// lost is left as it is, with stock.ErrUnavailable (or, when other lines
// were returned in the same call, an error matching
// stock.ErrUnknownOutcome: retry later).
func (s *Store) Revert(ctx context.Context, orderID string) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpRevert, 0)
	defer func() { tr.Done(err) }()
	defer named(&err, "revert order", orderID)
	defer func() { err = publicErr(err) }()
	if err := stock.ValidateID("orderID", orderID); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	ident, groups, err := s.lookup(ctx, orderID)
	if err != nil {
		return err
	}
	if len(groups) > 1 {
		// Across slots the revert scripts are not one atomic step: first
		// make sure every line has a record of the order (one without is
		// a line its Deduct has not taken yet, or has undone: the order is
		// not there to revert until every line is, as Confirm's precheck
		// answers) and no SKU's state is gone, so that a gate that lost
		// one returns nothing rather than some lines.
		lines, err := s.readLines(ctx, orderID, groups, "")
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(lines, func(l lineState) bool { return !l.of(ident) }); i >= 0 {
			return &stock.SKUError{SKU: lines[i].sku, Err: stock.ErrUnknownOrder}
		}
		if i := slices.IndexFunc(lines, func(l lineState) bool { return !l.live }); i >= 0 {
			return &stock.SKUError{SKU: lines[i].sku, Err: stock.ErrUnavailable}
		}
	}
	found, _, _, err := s.releaseAll(ctx, orderID, ident, groups, "revert")
	if err != nil {
		return err
	}
	if found == 0 {
		return orderErr(orderID, stock.ErrUnknownOrder)
	}
	return s.endEntry(ctx, orderID, ident)
}

// lookup reads the order's directory entry: its identity and its lines,
// grouped by slot. A missing entry is stock.ErrUnknownOrder.
func (s *Store) lookup(ctx context.Context, orderID string) (string, [][]stock.Item, error) {
	if err := s.ready(ctx); err != nil {
		return "", nil, err
	}
	var get *redis.StringCmd
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		get, at = p.HGet(ctx, s.dirKey(orderID), orderID), p.Time(ctx)
	})
	v, err := get.Result()
	if err != nil && err != redis.Nil {
		return "", nil, s.readErr(ctx, err)
	}
	now, err := serverMs(at)
	if err != nil {
		return "", nil, s.readErr(ctx, err)
	}
	d, ok, err := parseEntry(v, now)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, s.unknownOrder(ctx, orderID)
	}
	ident := d.ident
	items, err := parseIdent(ident)
	if err != nil {
		return "", nil, err
	}
	return ident, s.groups(items), nil
}

// parseIdent decodes user + "\n" + canon.Signature(items) into the items.
func parseIdent(ident string) ([]stock.Item, error) {
	_, sig, ok := strings.Cut(ident, "\n")
	if !ok {
		return nil, fmt.Errorf("malformed directory entry %q", ident)
	}
	var items []stock.Item
	for line := range strings.SplitSeq(sig, "\x1e") {
		if line == "" {
			continue
		}
		sku, q, ok := strings.Cut(line, "\x1f")
		qty, err := strconv.ParseInt(q, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("malformed directory entry %q", ident)
		}
		items = append(items, stock.Item{SKU: sku, Qty: qty})
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("malformed directory entry %q", ident)
	}
	return items, nil
}

// lineScript queues or runs a script that may end lines (5 keys per
// line: dealKeys and its gone list) with args now, order ID, then extra.
func (s *Store) lineScript(ctx context.Context, c redis.Scripter, sc *redis.Script, order string, g []stock.Item, now int64, extra ...any) *redis.Cmd {
	keys := make([]string, 0, 5*len(g))
	for _, it := range g {
		keys = append(s.dealKeys(keys, it.SKU), s.goneKey(it.SKU))
	}
	return sc.Run(ctx, c, keys, append([]any{now, order}, extra...)...)
}

// releaseAll runs stock_release.lua in mode on each group of the order's
// lines, in one pipeline that first keeps the order's directory entry open
// for endsGrace, as Confirm does, and sums the groups' replies: the lines
// found with the order's identity, and those whose units came back; in
// mode 'held', seen is the state of the last line a group found. A group
// whose SKU state is gone leaves the order holding stock (its directory
// entry keeps no TTL) and fails the call with stock.ErrUnavailable, an
// unknown outcome when another group returned units.
func (s *Store) releaseAll(ctx context.Context, orderID, ident string, groups [][]stock.Item, mode string) (found, changed int64, seen string, err error) {
	now := s.nowMs()
	cmds := make([]*redis.Cmd, len(groups))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		s.openEntry(ctx, p, orderID, now+endsGrace.Milliseconds())
		for i, g := range groups {
			cmds[i] = s.release(ctx, p, orderID, ident, g, now, mode, "")
		}
	})
	want := 2
	if mode == "held" {
		want = 3
	}
	var lost error
	for i, c := range cmds {
		res, err := c.Slice()
		if err != nil {
			return 0, 0, "", s.writeErr(ctx, err)
		}
		if code, n := replyCode(res); code == "unavailable" && n >= 1 && int(n) <= len(groups[i]) {
			lost = lineErr(code, groups[i][n-1].SKU)
			continue
		}
		if len(res) != want {
			return 0, 0, "", badReply(res)
		}
		n, ok1 := res[0].(int64)
		m, ok2 := res[1].(int64)
		if !ok1 || !ok2 {
			return 0, 0, "", badReply(res)
		}
		if want == 3 {
			st, ok := res[2].(string)
			if !ok {
				return 0, 0, "", badReply(res)
			}
			if st != "" {
				seen = st
			}
		}
		found, changed = found+n, changed+m
	}
	if lost != nil {
		// The order still holds stock: its directory entry keeps no TTL.
		if err := s.keepDirectory(ctx, orderID); err != nil {
			lost = errors.Join(detached(lost), err)
		}
		if changed > 0 {
			return found, changed, seen, &outcomeError{err: detached(lost)}
		}
		return found, changed, seen, lost
	}
	return found, changed, seen, nil
}
