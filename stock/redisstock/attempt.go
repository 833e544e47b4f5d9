package redisstock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
)

// The order path's scripts beside those store.go loads; see the headers in
// package lua.
var (
	dirBindScript  = redis.NewScript(lua.Script("stock_dir_bind.lua"))
	dirKeepScript  = redis.NewScript(lua.Script("stock_dir_keep.lua"))
	deadlineScript = redis.NewScript(lua.Script("stock_deadline.lua"))
)

// endsKey is the SKU's zset of orders a reclaim pass ended a line of and
// has not finished yet (their directory entry, their other slots).
func (s *Store) endsKey(sku string) string { return s.skuKey(sku, ":ends", "") }

// endDirectory queues the script that gives the order's directory entry
// the Retention of its ended records, if it still names ident.
func (s *Store) endDirectory(ctx context.Context, c redis.Scripter, order, ident string) *redis.Cmd {
	return dirKeepScript.Run(ctx, c, s.dirKeys(order), order, ident, s.keep.Milliseconds(), "end")
}

// endEntry ends the order's directory entry (endDirectory) once its
// lines answered that they ended (Confirm, Revert, a return that emptied
// the order), never in the same pipeline as their scripts: where a Deduct
// binds its entry before it takes (a Cluster, a Ring), a call that finds
// no line may run between the two, and must leave the entry to the take.
// The order is settled: a failure here is an unknown outcome, which the
// retry (answered as a repeat) completes, or the reclaimer (the entry's
// member in the open zset).
func (s *Store) endEntry(ctx context.Context, order, ident string) error {
	if err := s.endDirectory(ctx, s.c, order, ident).Err(); err != nil {
		return &outcomeError{err: s.writeErr(ctx, err)}
	}
	return nil
}

// openEntry queues the order's member in its directory shard's open zset,
// due at at (ms), first in the pipeline of a call that may end the order,
// so that should the call stop before the entry's end, the reclaimer
// settles the entry then (see stock_dir_check.lua; a bind adds the member
// in bindNew).
func (s *Store) openEntry(ctx context.Context, p redis.Pipeliner, order string, at int64) {
	p.ZAdd(ctx, s.dirKeys(order)[2], redis.Z{Score: float64(at), Member: order})
}

// attemptLease is how long an attempt counts on an entry it bound, ms: the
// default hold time plus Retention.
func (s *Store) attemptLease() int64 { return (stock.DefaultHoldTTL + s.keep).Milliseconds() }

// notOnSale is the error for a SKU whose state hash is missing: the gate
// lost its data (stock.ErrUnavailable) if the registry says the SKU was put
// on sale, or if the registry itself is gone; else stock.ErrUnknownSKU. It
// costs one round trip, on a path that is rare (a SKU never on sale, or a
// gate not rebuilt yet). A failed read leaves the answer open: the gate
// cannot answer for the SKU now, which is stock.ErrUnavailable too.
func (s *Store) notOnSale(ctx context.Context, sku string) error {
	reg, err := s.readRegistry(ctx, sku)
	if err != nil {
		return withCtx(ctx, fmt.Errorf("SKU %s: %w: %w", strconv.Quote(sku), stock.ErrUnavailable, err))
	}
	if !reg.exists || reg.member || reg.lost {
		return &stock.SKUError{SKU: sku, Err: stock.ErrUnavailable}
	}
	return &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
}

// unknownOrder is the error for an order ID with no directory entry:
// stock.ErrUnknownOrder, unless the SKU registry is gone too (the Redis
// lost everything), which is stock.ErrUnavailable.
func (s *Store) unknownOrder(ctx context.Context, orderID string) error {
	reg, err := s.readRegistry(ctx, "")
	if err != nil {
		return withCtx(ctx, fmt.Errorf("%w: %w", stock.ErrUnavailable, err))
	}
	if !reg.exists || reg.lost {
		return fmt.Errorf("the gate lost its data: %w", stock.ErrUnavailable)
	}
	return orderErr(orderID, stock.ErrUnknownOrder)
}

// keepDirectory takes the end off the order's directory entry again,
// after a Confirm or Revert that gave it one could not end the order (a
// SKU's state is gone): the entry lives as long as the order holds stock.
func (s *Store) keepDirectory(ctx context.Context, orderID string) error {
	err := dirKeepScript.Run(ctx, s.c, s.dirKeys(orderID), orderID, s.nowMs()+s.attemptLease(), s.keep.Milliseconds(), "keep").Err()
	return s.writeErr(ctx, err)
}

// detached keeps err's message but not its chain, for an infrastructure
// cause (stock.ErrUnavailable: nothing applied) reported inside an unknown
// outcome, which the two must never match together.
func detached(err error) error {
	return errors.New(err.Error())
}
