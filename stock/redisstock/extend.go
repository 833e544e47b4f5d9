package redisstock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// ExtendHold implements stock.HoldExtender. Each line's deadline and its
// score in the SKU's holds zset move together, only later and never past
// the order's bound (kept on each line record, field mx; an order taken
// before the field existed cannot be extended), so the reclaimer returns
// the hold at the new deadline. It costs a read of the order's directory
// entry and one atomic script call over the order's lines where they share
// a server or a slot. An order on several slots is checked whole, then
// each slot group moves in a step of its own: deadlines only grow, so a
// retry completes a call that failed midway, and a group the server
// refuses after the check makes the call stock.ErrUnknownOutcome. See
// "Partial reverts and hold extensions" in the package doc.
func (s *Store) ExtendHold(ctx context.Context, orderID string, deadline time.Time) (err error) {
	ctx, tr := s.obs.Track(ctx, "redisstock", observe.OpExtendHold, 0)
	defer func() { tr.Done(err) }()
	defer named(&err, "extend hold of order", orderID)
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
	now, want := s.nowMs(), canon.Millis(deadline)
	mode := "all"
	if len(groups) > 1 {
		lines, err := s.readLines(ctx, orderID, groups, "")
		if err != nil {
			return err
		}
		if done, err := extendCheck(orderID, ident, lines, now, want); done || err != nil {
			return err
		}
		mode = "part"
	}
	cmds := make([]*redis.Cmd, len(groups))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, g := range groups {
			keys := make([]string, 0, 4*len(g))
			for _, it := range g {
				keys = s.dealKeys(keys, it.SKU)
			}
			cmds[i] = extendScript.Run(ctx, p, keys, now, orderID, ident, want, mode)
		}
	})
	expired := false
	var refused error // a group the server refused in mode "part"
	for _, c := range cmds {
		res, err := c.Slice()
		if err != nil {
			err = s.writeErr(ctx, err)
			if len(cmds) > 1 {
				err = &outcomeError{err: err}
			}
			return err
		}
		code, n := replyCode(res)
		if code == "ok" && len(res) == 3 {
			due, _ := res[2].(int64)
			expired = expired || due > 0
			continue
		}
		err = cmp.Or(extendErr(orderID, code, n), badReply(res))
		if mode == "all" {
			return err
		}
		// Only a record gone, or of another order, since the check gets
		// here; the other groups' replies still count.
		refused = cmp.Or(refused, err)
	}
	if refused != nil {
		// Other groups may have moved their lines (now, or in a first run
		// of this pipeline the client resent): never a plain error, which
		// says nothing was applied.
		return &outcomeError{err: detached(refused)}
	}
	if expired {
		return orderErr(orderID, stock.ErrHoldExpired)
	}
	return nil
}

// extendErr maps a refusal of stock_extend.lua to its error, or nil for an
// unknown code.
func extendErr(orderID, code string, n int64) error {
	err := orderCodes[code]
	if code == "too_long" {
		err = fmt.Errorf("%w: the order's deadline may not pass %s", stock.ErrHoldTooLong, time.UnixMilli(n).UTC().Format(time.RFC3339Nano))
	}
	if err == nil {
		return nil
	}
	return orderErr(orderID, err)
}

// extendCheck checks an extension of an order on several slots against
// every line, in the order of the one-script path: done with its error for
// a refusal, done with nil for a deadline at or before the current one.
func extendCheck(orderID, ident string, lines []lineState, now, want int64) (bool, error) {
	code := func(c string, n int64) (bool, error) { return true, extendErr(orderID, c, n) }
	switch {
	case slices.ContainsFunc(lines, func(l lineState) bool { return !l.of(ident) }):
		return code("unknown", 0)
	case slices.ContainsFunc(lines, func(l lineState) bool { return l.st == "confirmed" }):
		return code("confirmed", 0)
	case slices.ContainsFunc(lines, func(l lineState) bool { return l.st == "reverted" || l.st == "refunded" }):
		return code("closed", 0)
	}
	cur, bound := int64(0), int64(0)
	for i, l := range lines {
		if l.st == "expired" || l.dl <= now {
			return code("expired", 0)
		}
		if i == 0 || l.dl < cur {
			cur = l.dl
		}
		if i == 0 || l.mx < bound {
			bound = l.mx
		}
	}
	switch {
	case want <= cur:
		return true, nil
	case want > bound:
		return code("too_long", bound)
	}
	return false, nil
}
