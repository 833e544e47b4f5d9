package redisstock

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
)

// lostMark is the registry member that says the registry was recreated by
// rebuilds after the Redis lost its data, and may not name every SKU on
// sale yet. No SKU can be it: SKUs never contain braces.
const lostMark = "{lost}"

var registryRebuildScript = redis.NewScript(lua.Script("stock_registry_rebuild.lua"))

// The script runs in pipelines, so it is loaded with the others after a
// NOSCRIPT (see errors.go).
func init() { allScripts = append(allScripts, registryRebuildScript) }

// rebuildRegistry adds sku to the registry for a rebuild, marking the
// registry incomplete when the rebuild is the one that recreates it.
func (s *Store) rebuildRegistry(ctx context.Context, c redis.Scripter, sku string) *redis.Cmd {
	return registryRebuildScript.Run(ctx, c, []string{s.registryKey()}, sku, lostMark, s.mark())
}

// Calibrated tells the gate that every SKU of the record has been rebuilt
// or checked since the Redis lost its data (package reconcile calls it at
// the end of a full pass). Until then a SKU whose state is missing is
// answered as lost (stock.ErrUnavailable) even when the recreated registry
// does not name it; from then on such a SKU is unknown. It is idempotent.
//
// It leaves the mark when the marker of [Store.Mark] is gone: the Redis
// lost its data again during the pass, and SKUs the pass rebuilt before
// that are lost again.
func (s *Store) Calibrated(ctx context.Context) (err error) {
	defer named(&err, "mark calibrated", "")
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := s.c.Exists(ctx, s.markerKey()).Result()
	if err != nil {
		return s.readErr(ctx, err)
	}
	if n == 0 {
		return nil
	}
	return s.writeErr(ctx, s.c.SRem(ctx, s.registryKey(), lostMark).Err())
}

// registry is what one read of the SKU registry says.
type registry struct {
	exists bool // the registry's key exists
	member bool // it names the SKU asked about
	lost   bool // it was recreated after Redis lost its data (lostMark)
}

// readRegistry reads, in one round trip, whether the registry exists,
// names sku ("" asks about no SKU) and carries the lost mark.
func (s *Store) readRegistry(ctx context.Context, sku string) (registry, error) {
	var exists *redis.IntCmd
	var member, lost *redis.BoolCmd
	s.pipelined(ctx, func(p redis.Pipeliner) {
		exists = p.Exists(ctx, s.registryKey())
		member = p.SIsMember(ctx, s.registryKey(), sku) // "" is never a member
		lost = p.SIsMember(ctx, s.registryKey(), lostMark)
	})
	if err := firstErr(exists, member, lost); err != nil {
		return registry{}, err
	}
	return registry{exists: exists.Val() == 1, member: member.Val(), lost: lost.Val()}, nil
}
