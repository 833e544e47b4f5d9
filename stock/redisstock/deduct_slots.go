package redisstock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
)

// deductSlots is Deduct on a Redis Cluster, where one script may touch one
// slot only: one pipeline binds the order ID to its items (SET NX GET on
// the directory entry's slot) and takes the first slot group, then the
// other groups are taken one by one; a failure undoes the groups taken and
// frees the order ID if this call bound it.
func (s *Store) deductSlots(ctx context.Context, o stock.Order, ident string, items []stock.Item) error {
	groups := s.groups(items)
	now := s.nowMs()
	dirTTL := stock.DefaultHoldTTL + s.keep

	// One round trip: bind the order ID to its items, and take the first
	// slot group.
	var dir, first *redis.Cmd
	created := false
	s.pipelined(ctx, func(p redis.Pipeliner) {
		// A resend (see pipelined) finds the entry its first send wrote.
		created = created || (dir != nil && dir.Err() == redis.Nil)
		dir = p.Do(ctx, "set", s.dirKey(o.ID), ident, "px", dirTTL.Milliseconds(), "nx", "get")
		first = s.deductGroup(ctx, p, o, ident, groups[0], now)
	})
	if err := firstErr(dir, first); err != nil {
		return s.writeErr(ctx, "deduct", err)
	}
	created = created || dir.Err() == redis.Nil
	if !created {
		if held, _ := dir.Text(); held != ident {
			taken := 0
			if ok, _, _ := s.groupResult(first, groups[0]); ok {
				taken = 1
			}
			return s.undo(ctx, o.ID, ident, groups[:taken], now,
				fmt.Errorf("redisstock: order %s: %w", strconv.Quote(o.ID), stock.ErrConflict))
		}
	}

	latest := int64(0)
	for i, g := range groups {
		res := first
		if i > 0 {
			res = s.deductGroup(ctx, s.c, o, ident, g, now)
			if err := res.Err(); err != nil {
				// The group may have been taken: the caller retries with
				// the same order ID, and the reclaimer returns whatever a
				// caller who gives up leaves held.
				return s.writeErr(ctx, "deduct", err)
			}
		}
		ok, dl, err := s.groupResult(res, g)
		if err != nil {
			err = s.undo(ctx, o.ID, ident, groups[:i], now, err)
			if created {
				if rerr := dirReleaseScript.Run(ctx, s.c, []string{s.dirKey(o.ID)}, ident).Err(); rerr != nil {
					err = errors.Join(err, s.writeErr(ctx, "free order ID", rerr))
				}
			}
			return err
		}
		if ok {
			latest = max(latest, dl)
		}
	}
	// Keep the directory as long as the records (holds longer than the
	// default hold time; rare).
	if ttl := latest - now + s.keep.Milliseconds(); ttl > dirTTL.Milliseconds() {
		if err := s.c.PExpire(ctx, s.dirKey(o.ID), time.Duration(ttl)*time.Millisecond).Err(); err != nil {
			return s.writeErr(ctx, "deduct", err)
		}
	}
	return nil
}

// deductGroup queues (on a pipeline) or runs the deduct script for the
// lines of one slot group.
func (s *Store) deductGroup(ctx context.Context, c redis.Scripter, o stock.Order, ident string, g []stock.Item, now int64) *redis.Cmd {
	keys := make([]string, 0, 4*len(g))
	args := make([]any, 0, 5+len(g))
	args = append(args, now, o.ID, o.UserID, ident, s.keep.Milliseconds())
	for _, it := range g {
		keys = s.lineKeys(keys, it.SKU, o.ID)
		args = append(args, it.Qty)
	}
	return deductScript.Run(ctx, c, keys, args...)
}

// groupResult reads a deduct script's reply: ok with the latest deadline,
// or the business error naming the failed line.
func (s *Store) groupResult(cmd *redis.Cmd, g []stock.Item) (bool, int64, error) {
	res, err := cmd.Slice()
	if err != nil {
		return false, 0, err
	}
	code, n := replyCode(res)
	if code == "ok" {
		return true, n, nil
	}
	if n >= 1 && int(n) <= len(g) {
		if err := lineErr(code, g[n-1].SKU); err != nil {
			return false, 0, err
		}
	}
	return false, 0, badReply("deduct", res)
}

// undo drops the holds of groups this order took (this identity only), so a
// failed Deduct leaves nothing held, and returns cause, joined with the
// undo's own failure if it had one: then the reclaimer returns the holds at
// their deadline.
func (s *Store) undo(ctx context.Context, order, ident string, groups [][]stock.Item, now int64, cause error) error {
	if len(groups) == 0 {
		return cause
	}
	cmds := make([]*redis.Cmd, len(groups))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, g := range groups {
			cmds[i] = s.release(ctx, p, order, ident, g, now, "drop")
		}
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return errors.Join(cause, s.writeErr(ctx, "undo deduct", err))
		}
	}
	return cause
}

// release queues or runs the release script for one slot group.
func (s *Store) release(ctx context.Context, c redis.Scripter, order, ident string, g []stock.Item, now int64, mode string) *redis.Cmd {
	keys := make([]string, 0, 4*len(g))
	for _, it := range g {
		keys = s.lineKeys(keys, it.SKU, order)
	}
	return releaseScript.Run(ctx, c, keys, now, order, ident, s.keep.Milliseconds(), mode)
}
