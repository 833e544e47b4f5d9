package redisstock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// migrateScript converts one key of layout 1; see its header.
var migrateScript = redis.NewScript(lua.Script("stock_migrate.lua"))

// MigrateReport counts what [Store.Migrate] converted.
type MigrateReport struct {
	// States are the SKU (and bucket) states whose hold time moved to the
	// field of layout 2.
	States int
	// Lines are the order lines moved from a key of their own to a field
	// of their SKU's lines hash.
	Lines int
	// Orders are the directory entries (with their attempt sets) moved to
	// a field of their directory shard.
	Orders int
}

// Migrate converts the data an earlier version of this package wrote under
// the Store's prefix (key layout 1: a key per order line, a key per order
// and, on a Redis Cluster, per order's attempt set; states with hold_ms)
// to the layout this version reads (Layout), in place, then marks the
// registry, so that Stores of this version serve the prefix. Data of
// layout 2 need no conversion (layout 3 adds the hold queues, empty until
// a Store of this version places a hold): Migrate replaces its mark. Run it once,
// with every Store of the prefix stopped (of either version): it scans the
// prefix's keys on every server (every master of a Cluster, every shard of
// a Ring; SCAN, in batches) and converts each key in one script of its own.
// A line's or an entry's Redis TTL becomes its end (Retention's rest, by
// the server's clock). Every step can run twice, so a Migrate that fails or
// stops is run again; on a prefix already of this layout it converts
// nothing. The alternative for a gate in front of a SQL record: delete the
// prefix's keys and rebuild the gate from the record (package reconcile).
// A context already done returns its error with nothing sent.
func (s *Store) Migrate(ctx context.Context) (_ MigrateReport, err error) {
	defer named(&err, "migrate", "")
	var rep MigrateReport
	if err := ctx.Err(); err != nil {
		return rep, notSent(err)
	}
	// A Cluster's or Ring's masters are scanned at once, each into its
	// own report, added to rep under mu when its scan ends.
	var mu sync.Mutex
	scan := func(ctx context.Context, c *redis.Client) error {
		var own MigrateReport
		defer func() {
			mu.Lock()
			rep.States += own.States
			rep.Lines += own.Lines
			rep.Orders += own.Orders
			mu.Unlock()
		}()
		iter := c.Scan(ctx, 0, s.prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				if err := s.migrateKeys(ctx, keys, &own); err != nil {
					return err
				}
				keys = keys[:0]
			}
		}
		if err := iter.Err(); err != nil {
			return s.readErr(ctx, err)
		}
		return s.migrateKeys(ctx, keys, &own)
	}
	switch c := s.base().(type) {
	case *redis.ClusterClient:
		// An error no scan returned is the failure to list the masters.
		type scanned struct{ error }
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			if err := scan(ctx, c); err != nil {
				return scanned{err}
			}
			return nil
		})
		if sc, ok := err.(scanned); ok {
			err = sc.error
		} else if err != nil {
			err = failed(err)
		}
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("cannot list the keys through a %T: give the Store a *redis.Client, *redis.ClusterClient or *redis.Ring", c)
	}
	if err != nil {
		return rep, err
	}
	// Last, the mark: a Migrate that stopped before it leaves the prefix
	// refused by Stores of this version, and is run again.
	n, err := s.c.Exists(ctx, s.registryKey()).Result()
	if err != nil {
		return rep, s.readErr(ctx, err)
	}
	if n == 1 {
		// A prefix of layout 2 keeps its directory's shard count; its
		// mark goes after the new one is added (a Migrate stopped in
		// between leaves both: the prefix is still refused).
		was, err := s.c.SMIsMember(ctx, s.registryKey(), markOf(2, 1), markOf(2, maxDirShards)).Result()
		if err != nil {
			return rep, s.readErr(ctx, err)
		}
		if len(was) != 2 {
			return rep, badReply(was)
		}
		if was[0] {
			s.useDirectory(1)
		} else if was[1] {
			s.useDirectory(maxDirShards)
		}
		var add, drop *redis.IntCmd
		s.pipelined(ctx, func(p redis.Pipeliner) {
			add = p.SAdd(ctx, s.registryKey(), s.mark())
			drop = p.SRem(ctx, s.registryKey(), markOf(2, 1), markOf(2, maxDirShards))
		})
		if err := errors.Join(add.Err(), drop.Err()); err != nil {
			return rep, s.writeErr(ctx, err)
		}
	}
	s.layout.Store(true)
	return rep, nil
}

// migrateKeys converts the keys of layout 1 among keys (every other key
// is left alone).
func (s *Store) migrateKeys(ctx context.Context, keys []string, rep *MigrateReport) error {
	for _, k := range keys {
		var err error
		var done bool
		var count *int
		rest, mine := strings.CutPrefix(k, s.prefix)
		switch {
		case !mine:
		case strings.HasPrefix(rest, ":order:{") || strings.HasPrefix(rest, ":bind:{"):
			// A bind key moves with its entry (whichever the scan finds
			// first); one left without an entry is deleted.
			count = &rep.Orders
			done, err = s.migrateEntry(ctx, strings.TrimSuffix(rest[strings.IndexByte(rest, '{')+1:], "}"))
		case strings.HasPrefix(rest, ":{"):
			sku, rest, ok := strings.Cut(rest[2:], "}")
			switch {
			case !ok:
			case rest == stateSuffix:
				count = &rep.States
				done, err = s.migrateRun(ctx, []string{k}, "state")
			case strings.HasPrefix(rest, ":o:"):
				count = &rep.Lines
				done, err = s.migrateRun(ctx, []string{k, s.linesKey(sku), s.goneKey(sku)}, "line", rest[len(":o:"):], s.keep.Milliseconds())
			}
		}
		if err != nil {
			return err
		}
		if done {
			*count++
		}
	}
	return nil
}

func (s *Store) migrateRun(ctx context.Context, keys []string, mode string, args ...any) (bool, error) {
	n, err := migrateScript.Run(ctx, s.c, keys, append([]any{mode}, args...)...).Int()
	if err != nil {
		return false, s.writeErr(ctx, err)
	}
	return n == 1, nil
}

// migrateEntry moves an order's directory entry of layout 1 (a string
// key, and on a Cluster its attempt set, a set key, each with its TTL) to
// the order's directory shard, then deletes the old keys. The keys are in
// two slots: it reads them, writes the entry (unless the shard has one of
// the ID), then deletes them, so it can run twice.
func (s *Store) migrateEntry(ctx context.Context, order string) (bool, error) {
	dirKey, bindKey := s.prefix+":order:{"+order+"}", s.prefix+":bind:{"+order+"}"
	var ident *redis.StringCmd
	var ttl, bindTTL *redis.DurationCmd
	var toks *redis.StringSliceCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		ident = p.Get(ctx, dirKey)
		ttl = p.PTTL(ctx, dirKey)
		toks = p.SMembers(ctx, bindKey)
		bindTTL = p.PTTL(ctx, bindKey)
	})
	if err := firstErr(ident, ttl, toks, bindTTL); err != nil {
		return false, s.readErr(ctx, err)
	}
	if ident.Err() == redis.Nil {
		return false, s.dropKeys(ctx, bindKey)
	}
	ms := func(d time.Duration) int64 {
		if d > 0 {
			return d.Milliseconds()
		}
		return -1
	}
	// Not ended, it is checked by the reclaimer once its attempts' lease
	// has passed (at once, without one).
	done, err := s.migrateRun(ctx, s.dirKeys(order), "entry", order, ident.Val(), ms(ttl.Val()),
		strings.Join(toks.Val(), ","), ms(bindTTL.Val()), s.nowMs()+max(bindTTL.Val().Milliseconds(), 0))
	if err != nil {
		return false, err
	}
	return done, s.dropKeys(ctx, dirKey, bindKey)
}

// dropKeys deletes keys (on a Cluster each in its own slot), in one round
// trip.
func (s *Store) dropKeys(ctx context.Context, keys ...string) error {
	var cmds []redis.Cmder
	s.pipelined(ctx, func(p redis.Pipeliner) {
		for _, k := range keys {
			cmds = append(cmds, p.Del(ctx, k))
		}
	})
	return s.writeErr(ctx, firstErr(cmds...))
}
