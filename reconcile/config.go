package reconcile

import (
	"errors"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Config configures a Reconciler. The zero value means defaults.
type Config struct {
	// BatchSize is how many SKUs one pass reads together (a few round
	// trips per batch, whatever its size); default 1000.
	BatchSize int
	// Workers is how many batches RepairAll works on at once; default 4.
	Workers int
	// MaxAutoFix is the largest correction, in units either way, a pass
	// applies by itself; a larger one is reported (ActionLeft) and left
	// for a person. Default 1000; a negative value fixes any size. A
	// correction down of a SKU the same pass rebuilt beside buckets that
	// lived (redisstock Partial) is made whatever its size.
	MaxAutoFix int64
	// DryRun makes every pass report what it would do and change nothing
	// of either tier's counts, settings or holds. Its read of the gate
	// (redisstock Store.Snapshot) still puts back in the gate's registry
	// of SKUs a SKU whose state lives but is missing from it (its key
	// lost alone), so that the reclaimer finds its holds again.
	DryRun bool
	// MaxAttempts bounds how often a SKU is read again when an
	// administrative write (put on sale, restock, another reconciler's
	// correction) moved it between the reads and the correction; default 5.
	MaxAttempts int
	// OnCorrection, if set, is called for every SKU a pass finds out of
	// agreement, whatever it did about it (see Action), synchronously, from
	// the goroutine running the pass.
	OnCorrection func(Correction)
	// Observer receives every Correction OnCorrection does (package
	// observe), synchronously; the zero value reports nothing.
	Observer observe.Observer
	// Interval is how often Run makes a full pass; default 1 minute.
	Interval time.Duration
	// WatchInterval is how often Run checks whether Redis restarted, was
	// flushed or failed over (and then makes a full pass at once); default
	// 1 second.
	WatchInterval time.Duration
	// OnError, if set, is called by Run with every failed pass or check.
	OnError func(error)
	// GateHold maps the record's hold time of a SKU to the hold time the
	// gate gets when a pass puts the SKU on sale there (warm-up, rebuild
	// after a flush). The default is the mapping of the tiered flow with
	// its default Config (tiered.Config{}.GateHold: half the record's, as
	// that flow gives the record twice the gate's hold time). With a
	// tiered Config that sets RecordGrace, pass that Manager's GateHold
	// (or that Config's GateHold); over the stores of a stockguard.Shop,
	// make the Reconciler with Shop.NewReconciler, which passes the
	// Shop's; a shop whose gate and record hold for
	// the same time (no stock/tiered) passes the identity. The gate's
	// MaxHoldTTL is the record's less the same grace (the record time less
	// GateHold of it). A mapping of one's own must give, like tiered's,
	// the smallest gate hold time whose record hold is record, of a record
	// hold that grows with the gate's and is capped at stock.MaxHoldTTL: a
	// pass takes a gate setting as the record's when it is that smallest
	// one or, where the record's is at the cap, any longer one (all of them
	// give the record the cap), so it never shortens a gate's hold time
	// that the flow's cap folded.
	GateHold func(record time.Duration) time.Duration
	// RestockWindow is how far back a pass reads the record's restocks
	// (by operation ID) to find those the gate has not applied yet: such a
	// restock is in flight (stock/tiered writes the record first), so a
	// pass neither counts it as drift nor applies it twice; it completes it
	// at the gate with the same operation ID, which the gate then
	// remembers for its Retention: a retry of the restock (stock/tiered
	// Restock after an unknown outcome) adds nothing more there. A restock
	// older than the window that never reached the gate is drift, and its
	// retry would add it at the gate again: the window must cover the
	// longest the gate may stay out of reach. Default half the gate's
	// Retention (12 hours with redisstock's default), as long as the
	// gate's memory of operation IDs lets a pass trust its answer with a
	// margin for clocks; New refuses a window not below the gate's
	// Retention (the gate must remember every operation of the window).
	RestockWindow time.Duration
	// Clock gives the time RestockWindow is measured back from; give it the
	// record's clock (sqlstock Config.Clock). Default stock.SystemClock.
	Clock stock.Clock
}

const (
	defaultBatchSize   = 1000
	defaultMaxAutoFix  = 1000
	defaultMaxAttempts = 5
)

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.MaxAutoFix == 0 {
		c.MaxAutoFix = defaultMaxAutoFix
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = time.Second
	}
	if c.GateHold == nil {
		c.GateHold = tiered.Config{}.GateHold
	}
	if c.Clock == nil {
		c.Clock = stock.SystemClock
	}
	return c
}

// Errors a pass returns, wrapped with detail; compare with errors.Is.
var (
	// ErrUnresolved: the pass left some SKU out of agreement (too large a
	// correction, a SKU busy with administrative writes, a SKU in Redis
	// that the database does not have, a hold without its record). The
	// Report says which.
	ErrUnresolved = errors.New("reconcile: drift left unresolved")
	// ErrLiveHolds: WarmUp refused to overwrite SKUs that have live holds
	// in Redis; pass force to overwrite them anyway.
	ErrLiveHolds = errors.New("reconcile: SKU has live holds in Redis")
)

// Action is what a pass did about one SKU.
type Action int

const (
	// ActionCorrected: the correction was applied to Redis.
	ActionCorrected Action = iota + 1
	// ActionLeft: the correction is larger than Config.MaxAutoFix; nothing
	// was changed.
	ActionLeft
	// ActionDryRun: Config.DryRun is set; nothing was changed.
	ActionDryRun
	// ActionRebuilt: Redis had no state for a SKU the database has
	// (flushed, restarted without persistence, never warmed up): it was
	// created from the database, where it still had none (a state created
	// meanwhile is never overwritten; the SKU is read again). WarmUp also
	// reports every SKU it wrote with it.
	ActionRebuilt
	// ActionStale: the SKU kept changing under administrative writes for
	// Config.MaxAttempts reads; nothing was changed. (Also a SKU the last
	// attempt rebuilt beside buckets that lived, on sale with their units:
	// see Correction.Err.) Repair and WarmUp then return an error wrapping
	// ErrUnresolved.
	ActionStale
	// ActionFailed: the SKU could not be reconciled (see Correction.Err);
	// also a SKU a pass ended holds of (Correction.Ended, its other
	// figures zero) before it stopped on an error, without reading it
	// again.
	ActionFailed
	// ActionRefused: WarmUp did not overwrite a SKU with live holds.
	ActionRefused
	// ActionMismatch: WarmUp's check after writing found the SKU still out
	// of agreement (a live order or write interleaved; a repair pass fixes
	// it).
	ActionMismatch
	// ActionRestocked: the only disagreement was restocks the database
	// applied and Redis had not yet (Correction.Restocking); the pass
	// completed them at Redis by their operation IDs.
	ActionRestocked
	// ActionEnded: Redis held orders (Correction.Ended units) that the
	// database has returned (reverted, refunded or expired), e.g.
	// cancelled at the record alone while a breaker kept traffic off
	// Redis; the pass ended each at Redis (RevertHeld: expired there, only
	// while Redis still held it), read the SKU again, and that reading
	// needed nothing (Delta is 0). A reading that needed more is
	// reported with its own Action, Correction.Ended set. MaxAutoFix does
	// not bound it: each is the order's own end, applied once, which
	// Redis's reclaimer would make at the hold's deadline. An order the
	// database confirmed is not ended at Redis, nor one Redis no longer
	// holds (see the package doc).
	ActionEnded
)

var actionNames = [...]string{"", "corrected", "left", "dry-run", "rebuilt", "stale", "failed", "refused", "mismatch", "restocked", "ended"}

// String returns the action's name, e.g. "corrected".
func (a Action) String() string {
	if a > 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(?)"
}

// Correction is one SKU found out of agreement, with the figures the
// correction was computed from, all as of one consistent reading.
type Correction struct {
	SKU    string
	Action Action
	// Before is Redis's available count; After is what it should be (and
	// is, for ActionCorrected and ActionRebuilt, up to orders taken since
	// the reading). Delta is After - Before.
	Before, After, Delta int64
	// Record is the database's available count.
	Record int64
	// InFlight is the units Redis holds for orders the database has not
	// recorded (Redis will release them or the database will take them),
	// or has confirmed alone (Redis returns them at the hold's deadline);
	// with ActionDryRun, those of Ended too.
	InFlight int64
	// Returning is the units the database holds for orders Redis has
	// already returned: the database will release them.
	Returning int64
	// Settings says the correction also gave Redis the database's
	// settings of the SKU (per-user limit, hold time and maximum hold
	// time, mapped by Config.GateHold): a listing changed at the database
	// alone.
	Settings bool
	// Restocking is the units of restocks (within Config.RestockWindow)
	// the database applied and Redis had not: After leaves them out, and
	// the pass completes them at Redis by their operation IDs (whatever the
	// Action, except ActionDryRun, ActionStale and ActionFailed), so
	// Redis ends with After + Restocking.
	Restocking int64
	// Ended is the units of Redis's holds whose orders the database has
	// returned (reverted, refunded or expired there), which the pass
	// ended at Redis (each an order RevertHeld found held there) before
	// the reading reported (Before, After and Delta are as read after);
	// with ActionDryRun, those a pass would end, counted in InFlight and
	// in the figures as read.
	Ended int64
	// Err says why, for ActionFailed, ActionStale and ActionRefused.
	Err error
}

// Report sums up one pass.
type Report struct {
	// Checked is how many SKUs the pass read.
	Checked int
	// InAgreement is how many needed nothing.
	InAgreement int
	// Corrections lists every other SKU, in the order handled.
	Corrections []Correction
}

// Count returns how many corrections had action a.
func (r Report) Count(a Action) int {
	n := 0
	for _, c := range r.Corrections {
		if c.Action == a {
			n++
		}
	}
	return n
}

func (r *Report) add(o Report) {
	r.Checked += o.Checked
	r.InAgreement += o.InAgreement
	r.Corrections = append(r.Corrections, o.Corrections...)
}
