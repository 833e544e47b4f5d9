package reconcile

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Gate is what a Reconciler needs of the Redis gate. *redisstock.Store
// implements it; so does any wrapper (metrics, tracing, fault injection)
// that forwards these methods to one.
type Gate interface {
	// Inspect reads each SKU's state (its Fence above all).
	Inspect(ctx context.Context, skus []string) ([]redisstock.SKUState, error)
	// Snapshot reads each SKU, its holds, chosen order lines and chosen
	// restock operations atomically.
	Snapshot(ctx context.Context, reqs []redisstock.SnapshotRequest) ([]redisstock.Snapshot, error)
	// Adjust applies a correction if the SKU's fence is still f.
	Adjust(ctx context.Context, sku string, f redisstock.Fence, delta int64) (bool, error)
	// ClaimRebuild claims SKUs the gate has no state for before the record
	// is read, so that a rebuild from a reading a flush made stale is
	// refused.
	ClaimRebuild(ctx context.Context, skus []string) ([]string, error)
	// Rebuild creates the state of SKUs that have none, never overwriting.
	Rebuild(ctx context.Context, rs []redisstock.Rebuild) ([]redisstock.Outcome, error)
	// Relist is WarmUp's fenced write of a SKU on sale.
	Relist(ctx context.Context, rls []redisstock.Relist) ([]redisstock.Outcome, error)
	// Restock applies a restock once per operation ID (a pass completes the
	// record's restocks in flight with it).
	Restock(ctx context.Context, r stock.Restock) error
	// RevertHeld returns a held order's units and quota at the gate and
	// ends it expired, and changes nothing for an order in any other
	// state (stock.HoldReverter): a pass ends with it a gate hold whose
	// order the record has returned (ActionEnded), and counts the end
	// only where it answers stock.StateHeld.
	RevertHeld(ctx context.Context, orderID string) (stock.State, error)
	// Mark and Servers tell a pass that Redis lost its data.
	Mark(ctx context.Context) error
	// Calibrated says a full pass visited every SKU of the record: a SKU
	// Redis still has no state for is unknown, no longer lost.
	Calibrated(ctx context.Context) error
	Servers(ctx context.Context) (redisstock.Servers, error)
	// Retention is how long the gate remembers a restock operation.
	Retention() time.Duration
}

// Record is what a Reconciler needs of the SQL record, the source of
// truth. *sqlstock.Store implements it, and so does a wrapper that
// forwards these methods to one.
type Record interface {
	// SKUs pages through the record's SKUs.
	SKUs(ctx context.Context, after string, limit int) ([]string, error)
	// View opens one consistent read of stock rows, ledger and restocks.
	View(ctx context.Context) (*sqlstock.View, error)
}

var (
	_ Gate   = (*redisstock.Store)(nil)
	_ Record = (*sqlstock.Store)(nil)
)
