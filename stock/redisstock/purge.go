package redisstock

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
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

// purgeSKU queues the script that deletes the SKU's line records whose
// retention has passed.
func (s *Store) purgeSKU(ctx context.Context, p redis.Pipeliner, sku string) *redis.Cmd {
	return purgeScript.Run(ctx, p, []string{s.linesKey(sku), s.goneKey(sku)}, purgeBatch, "line")
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
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return s.writeErr(ctx, err)
		}
	}
	return nil
}
