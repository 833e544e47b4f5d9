package systemtest

import (
	"context"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Flow is one node's composed order flow: a stock.Manager and
// stock.Reclaimer over a gate and a record, such as a *tiered.Manager.
type Flow interface {
	stock.Manager
	stock.Reclaimer
}

// Wrap puts the checker's hand-off points around one node's gate and
// record (see Config.Node).
type Wrap func(gate tiered.GateStore, record tiered.RecordStore) (tiered.GateStore, tiered.RecordStore)

// Reader is what the checks read of a tier: its levels and its orders. The
// checker reads through it directly, never through the faults it injects.
type Reader interface {
	Levels(ctx context.Context, sku string) (stock.Levels, error)
	stock.OrderReader
}

// Clock is the shop's clock, shared by every tier and node: the checker
// reads it to know deadlines and advances it to let holds expire. A
// *stocktest.Clock is one; a wiring on miniredis also fast-forwards the
// server, so that key lifetimes move with the clock.
type Clock interface {
	stock.Clock
	Advance(d time.Duration)
}

// Config wires the composed flow the checker drives. Node, Gate, Record,
// Clock and Repair are required; every other field has a default.
// The checker calls the functions from one goroutine at a time, except
// that a call it parked (see the package doc) stays blocked inside them
// while later calls run.
type Config struct {
	// Seed chooses the interleaving and the faults; the same seed and
	// wiring replay the same steps. Zero means 1.
	Seed uint64
	// Steps is how many random steps a run takes before quiescence;
	// default 150.
	Steps int
	// Script, if set, replaces the random steps: the run takes these, in
	// order, with the faults they name, then comes to quiescence as usual.
	Script []Step
	// Nodes is how many application nodes share the two tiers; default 3.
	Nodes int
	// Node builds node i's flow over its own gate and record (its own
	// Store values over the shared servers, as separate processes would
	// have), with wrap around the two as the flow uses them: the checker's
	// hand-off points, which forward every interface of the stores.
	// stockguard.Config.Wrap takes wrap as it is; the flow must call it
	// once.
	Node func(i int, wrap Wrap) (Flow, error)
	// Gate and Record read the two tiers for the checks.
	Gate, Record Reader
	// Clock is the clock every tier reads.
	Clock Clock
	// Repair makes one reconciliation pass over skus (for example
	// reconcile.Reconciler.Repair), rebuilding a gate that lost its data.
	// Its context carries the checker's fault plan: a Redis client with
	// RedisHook installed lets the checker park the pass, lose a reply or
	// resend a command inside it.
	Repair func(ctx context.Context, skus []string) error
	// Lapse, if set, is called once the run is at rest (no call in flight
	// or parked), before its first repair: it returns once what the calls
	// whose node died left behind with a lifetime of its own has lapsed,
	// as it has by the time a real shop comes to rest. A redisstock
	// gate's transfer lease is such a thing: a refill whose node died
	// leaves it, and every fenced correction of its SKU waits for it to
	// expire (by the server's clock, which the checker's does not move on
	// a real server). An error is a violation (CheckNotQuiescent).
	Lapse func(ctx context.Context) error
	// Flush, if set, makes the gate lose every key of the flow at once
	// (miniredis FlushAll, a FLUSHALL of a server the test owns, or the
	// deletion of the flow's keys on a shared server).
	Flush func(ctx context.Context) error
	// Restart, if set, restarts the gate's server without persistence: its
	// data is lost and its connections drop.
	Restart func(ctx context.Context) error
	// Listings are the SKUs put on sale at the start, through node 0's
	// flow; default DefaultListings. Hold times should be a few seconds:
	// the clock moves in steps of up to MaxTick.
	Listings []stock.Listing
	// Users is how many buyers place orders (the per-user limits apply to
	// each); default 4.
	Users int
	// MaxTick is the longest single advance of the clock; default 2s.
	MaxTick time.Duration
	// FaultRate is the share of calls that get a fault, in [0, 1];
	// default 0.35. A negative value injects none.
	FaultRate float64
	// Settle is how far the clock moves at quiescence, past every hold of
	// both tiers; default 1h.
	Settle time.Duration
	// StepTimeout bounds one step: a step that neither finishes nor parks
	// in that time is reported as hung and ends the run; default 30s.
	StepTimeout time.Duration
	// NoPartial leaves out the steps of partial returns
	// (stock.PartialReverter), hold extensions (stock.HoldExtender) and
	// orders with their own hold time, which a run otherwise takes where
	// the flows implement them; it also replays the seeds of runs from
	// before those steps existed.
	NoPartial bool
	// Footprint, if set, reads what the gate stores for the flow: for a
	// Redis gate, every key under the flow's prefix with its size (see
	// RedisFootprint). The checker reads it once the listings are on
	// sale, and again at rest after Retention has passed and the
	// reclaimer has run: every order has ended by then, so the gate must
	// store no key it did not store before the first order, and none
	// larger (CheckMemory).
	Footprint func(ctx context.Context) (map[string]int64, error)
	// Retention is how long past the end of the run every per-order item
	// the gate keeps for an ended order is gone, once a reclaim pass has
	// run (for a redisstock gate: its Config.Retention plus
	// stock.DefaultHoldTTL, the lease of an attempt that ended without
	// an answer). The memory check moves the clock this far after the run
	// is at rest. Required with Footprint.
	Retention time.Duration
	// Logf, if set, receives every step of the trace as it runs.
	Logf func(format string, args ...any)
}

// DefaultListings are the SKUs of a Config that sets none: three SKUs
// with different hold times, two of them with a per-user limit, two with
// holds that may be extended (MaxHoldTTL).
var DefaultListings = []stock.Listing{
	{SKU: "sys-a", Units: 12, PerUserLimit: 4, HoldTTL: 4 * time.Second, MaxHoldTTL: 10 * time.Second},
	{SKU: "sys-b", Units: 8, HoldTTL: 6 * time.Second, MaxHoldTTL: 15 * time.Second},
	{SKU: "sys-c", Units: 6, PerUserLimit: 3, HoldTTL: 3 * time.Second},
}

func (c Config) withDefaults() Config {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Steps <= 0 {
		c.Steps = 150
	}
	if c.Nodes <= 0 {
		c.Nodes = 3
	}
	if len(c.Listings) == 0 {
		c.Listings = DefaultListings
	}
	if c.Users <= 0 {
		c.Users = 4
	}
	if c.MaxTick <= 0 {
		c.MaxTick = 2 * time.Second
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.35
	}
	if c.Settle <= 0 {
		c.Settle = time.Hour
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 30 * time.Second
	}
	return c
}
