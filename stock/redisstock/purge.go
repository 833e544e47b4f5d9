package redisstock

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// purgeBatch is the most ended records (or directory entries) one purge
// script deletes from one list; a pass that leaves more due, deletes them
// in the next pass.
const purgeBatch = 1000

// goneDue reports whether a gone list's first item (LINDEX 0: "<e> <order
// ID>"; redis.Nil for an empty list) is due at now (the server's time).
func goneDue(head *redis.StringCmd, now int64) (bool, error) {
	v, err := head.Result()
	if err == redis.Nil {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e, _, _ := strings.Cut(v, " ")
	at, err := strconv.ParseInt(e, 10, 64)
	return err != nil || at <= now, nil // a malformed item is taken off
}

// purgeDirs deletes the directory entries whose retention has passed, from
// the shards of dir whose gone list's first item (heads, one per shard) is
// due at now (the server's time), in one round trip (none when nothing is
// due).
func (s *Store) purgeDirs(ctx context.Context, dir *directory, heads []*redis.StringCmd, now int64) error {
	var due []int
	for k, h := range heads {
		ok, err := goneDue(h, now)
		if err != nil {
			return s.readErr(ctx, err)
		}
		if ok {
			due = append(due, k)
		}
	}
	if len(due) == 0 {
		return nil
	}
	cmds := make([]*redis.Cmd, len(due))
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for i, k := range due {
			cmds[i] = purgeScript.Run(ctx, p, []string{dir.keys[k], dir.gones[k]}, purgeBatch, "dir")
		}
	})
	return s.writeErr(ctx, errOf(cmds))
}

// dirCheckScript settles the open entries whose check time came; see its
// header.
var dirCheckScript = redis.NewScript(lua.Script("stock_dir_check.lua"))

func init() { allScripts = append(allScripts, dirCheckScript) }

// checkOpen settles the directory entries whose check time came (due: one
// ZRANGEBYSCORE reply per shard of dir), by what their orders' line
// records say: an order with a held line is checked again after its
// deadline, one whose lines all ended has its entry ended (read no longer
// than they are), one with no
// record (it took nothing, and no attempt bound to it may still take) has
// its entry deleted. Two round trips of reads, then one script per shard.
func (s *Store) checkOpen(ctx context.Context, dir *directory, due []*redis.StringSliceCmd, now int64) error {
	type open struct {
		shard     int
		id, ident string
		entry     *redis.StringCmd
		lines     []*redis.StringCmd
	}
	var ents []*open
	for k, c := range due {
		ids, err := c.Result()
		if err != nil {
			return s.readErr(ctx, err)
		}
		for _, id := range ids {
			ents = append(ents, &open{shard: k, id: id})
		}
	}
	if len(ents) == 0 {
		return nil
	}
	var at *redis.TimeCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, o := range ents {
			o.entry = p.HGet(ctx, dir.keys[o.shard], o.id)
		}
		at = p.Time(ctx)
	})
	snow, err := serverMs(at) // ends are the server's time
	if err != nil {
		return s.readErr(ctx, err)
	}
	for _, o := range ents {
		if err := o.entry.Err(); err != nil && err != redis.Nil {
			return s.readErr(ctx, err)
		}
	}
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, o := range ents {
			d, ok, _ := parseEntry(o.entry.Val(), snow)
			items, err := parseIdent(d.ident)
			if !ok || d.e != 0 || err != nil {
				continue // gone or ended: the member goes
			}
			o.ident = d.ident
			for _, it := range items {
				o.lines = append(o.lines, p.HGet(ctx, s.linesKey(it.SKU), o.id))
			}
		}
	})
	args := make(map[int][]any)
	for _, o := range ents {
		action, when, ends := "drop", int64(0), int64(0)
		if o.ident != "" {
			action = "free"
		}
		for _, l := range o.lines {
			if err := l.Err(); err != nil && err != redis.Nil {
				return s.readErr(ctx, err)
			}
			r, ok, _ := parseRecord(l.Val(), 0) // an ended record, even past its end, was taken
			switch {
			case !ok || r.ident != o.ident:
			case r.st == "held":
				action, when = "later", max(when, r.dl+endsGrace.Milliseconds(), now+endsGrace.Milliseconds())
			default:
				if r.e > 0 && (ends == 0 || r.e < ends) {
					ends = r.e
				}
				if action == "free" {
					action = "end"
				}
			}
		}
		if action == "end" {
			when = ends // the entry is read no longer than its lines
		}
		if args[o.shard] == nil {
			args[o.shard] = []any{now, s.keep.Milliseconds()}
		}
		args[o.shard] = append(args[o.shard], o.id, o.ident, action, when)
	}
	var cmds []*redis.Cmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for k, a := range args {
			cmds = append(cmds, dirCheckScript.Run(ctx, p, []string{dir.keys[k], dir.gones[k], dir.opens[k]}, a...))
		}
	})
	return s.writeErr(ctx, errOf(cmds))
}
