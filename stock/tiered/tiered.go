package tiered

import (
	"context"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Recorder hands an order held at the gate to the application's own queue.
// The queue's consumer must later call [Manager.Settle] with the same order
// (at least once; Settle is idempotent).
//
// Record returns nil once the order is queued. An error means it may not
// be: Deduct returns the error and leaves the gate hold in place, so the
// caller may retry the Deduct (the same order ID takes nothing twice) or
// Revert it; if neither happens the gate's reclaimer returns the hold. A
// message that was queued after all is harmless: Settle of an order whose
// gate hold is gone records nothing.
type Recorder interface {
	Record(ctx context.Context, o stock.Order) error
}

// DeadlineRecorder is a Recorder that can also hand off an order with the
// deadline of its gate hold as the gate tells it. [Manager.Place] calls
// RecordUntil instead of Record for the retry of an order it answered
// half-way, once the gate says it holds the order and until when (one
// read, for such retries only): the hold began with the earlier attempt,
// not with the retry. handoff.Recorder is one.
type DeadlineRecorder interface {
	Recorder
	RecordUntil(ctx context.Context, o stock.Order, deadline time.Time) error
}

// Admitter is a Recorder that may turn new orders away before the gate
// holds anything: [Manager.Place] (and Deduct) asks Admit first, and an
// error from it is returned as it is, with nothing held at either tier.
// A Recorder whose queue lags implements it to slow admissions instead of
// selling holds that would expire before the record takes them
// (handoff.Recorder does). Admit's refusal should match
// stock.ErrContention (nothing applied, retry later). Settle does not ask
// it: an order the gate holds is always recorded. Nor does the retry of
// a Place that the same Manager answered half-way (an unknown outcome:
// the gate may hold the order, the hand-off did not take it), which it
// remembers (the last 4096 such orders), once the gate says it has the
// order (one read, for such retries only), so that the retry finishes the
// hand-off. A retry on another node is answered as a new order is; its
// refusal then says that this call applied nothing, and the hold the
// earlier attempt may have placed stands until a later retry finishes
// its hand-off, or the gate returns it at its deadline.
type Admitter interface {
	Admit(ctx context.Context, o stock.Order) error
}

// RecorderFunc adapts a function to a Recorder.
type RecorderFunc func(ctx context.Context, o stock.Order) error

// Record calls f.
func (f RecorderFunc) Record(ctx context.Context, o stock.Order) error { return f(ctx, o) }

// Placement says where an order stands after a successful Place.
type Placement int

const (
	// Recorded: the gate holds the order and the record has it.
	Recorded Placement = iota
	// Pending: the gate holds the order and it was handed to the Recorder;
	// the record has it once Settle returns nil for it.
	Pending
)

func (p Placement) String() string {
	if p == Pending {
		return "pending"
	}
	return "recorded"
}

// Tier names one of the two tiers in errors and drift reports.
type Tier string

// The two tiers.
const (
	Gate   Tier = "gate"
	Record Tier = "record"
)

// Drift is a disagreement between the tiers about one order that the
// Manager leaves for reconciliation to repair.
type Drift struct {
	OrderID string
	// Tier is the tier whose answer disagreed with the other's.
	Tier Tier
	// Op is the call during which it was seen.
	Op string
	// Err is what Tier answered.
	Err error
	// SKUs are the SKUs of the order's lines when the call knew them (the
	// reclaimer does; Confirm does not): the SKUs to reconcile.
	SKUs []string
}

// Config configures a Manager. The zero value means a synchronous hand-off,
// no drift reports and the wall clock.
type Config struct {
	// Observer receives the Manager's calls (package observe); the zero
	// value reports nothing.
	Observer observe.Observer
	// Recorder, if set, makes the hand-off asynchronous: Deduct queues the
	// order through it and returns once the gate holds it. Nil means
	// synchronous: Deduct records the order before it returns.
	Recorder Recorder
	// OnDrift, if set, is called (synchronously, so keep it short) when the
	// tiers disagree about an order in a way only reconciliation repairs,
	// e.g. the record confirmed a sale whose gate hold had already expired.
	OnDrift func(Drift)
	// RecordGrace is how much longer a hold lasts at the record than at the
	// gate: PutOnSale gives the record the listing's hold time plus
	// RecordGrace (at most stock.MaxHoldTTL). The gate decides when a hold
	// ends and ReclaimExpired returns the record's copy with it; the
	// record's own, later deadline only returns copies that a crash left
	// behind. It must exceed the reclaimer's interval plus the clock skew
	// between nodes. Zero means the hold time itself (the record holds
	// twice as long as the gate); a negative grace is taken as zero
	// (package stockguard refuses one).
	//
	// It also bounds ReclaimExpired's follow-up: with RecordGrace set, the
	// follow-up lists only record copies whose gate deadline has passed;
	// with zero (a grace that differs per SKU) it lists up to the pass's
	// limit of the record's earliest copies and reads the hold time of
	// their SKUs to find those. That reading is today's hold time, so with
	// zero a SKU relisted with a longer hold time has the copies the gate
	// does not know (a gate that lost its data, a fallback's orders)
	// returned before their deadline; and with SKUs of different hold
	// times, more than limit live holds of shorter ones, listed first,
	// keep the pass from reaching a copy of a longer one that it should
	// return (it stays until the record's deadline). Set RecordGrace where
	// hold times differ or change while orders are held.
	RecordGrace time.Duration
	// RecheckAfter is how long Settle waits before asking the record once
	// more when it refuses an order as sold out or over the per-user limit,
	// before the refusal stands (see ReclaimExpired: a unit the gate has
	// just returned may still be held at the record for a few round
	// trips). Zero means 25ms; negative means no second ask. In a healthy
	// flow the record refuses nothing the gate admitted, so the wait is
	// paid only in that window or when the tiers have drifted.
	RecheckAfter time.Duration
	// Clock tells the time for the decisions that compare a record copy's
	// deadline with now: which copies ReclaimExpired's record-side
	// follow-up may return, and whether a closed order's hold had expired.
	// Nil means stock.SystemClock. Give it the clock the tiers read (in
	// tests, the stocktest.Clock they share).
	Clock stock.Clock
}

const defaultRecheckAfter = 25 * time.Millisecond

// GateStore is what a Manager needs of its gate: a stock.Manager whose
// holds expire (stock.Reclaimer, run by ReclaimExpired), that reports
// its orders (stock.OrderReader, asked by ReclaimExpired which record
// copies it no longer holds), ends a hold only while it is held
// (stock.HoldReverter: a hold whose record copy expired first ends
// expired at the gate too, so that every later answer about the order
// says it expired), and says what it would refuse in a listing before the
// record takes it (ListingChecker). package stock/redisstock's Store is
// one, and so is stock/memstock's.
//
// A wrapper of a gate (metrics, tracing, a test fault) must forward every
// interface to the wrapped store; one that forwards only stock.Manager
// does not compile as a GateStore, instead of changing what the flow does
// at run time.
type GateStore interface {
	stock.Manager
	stock.Reclaimer
	stock.OrderReader
	stock.HoldReverter
	stock.PartialReverter
	stock.HoldExtender
	ListingChecker
}

// RecordStore is what a Manager needs of its record: a stock.Manager whose
// holds expire (stock.Reclaimer: the backstop for copies a crash left
// behind), that reports its orders (stock.OrderReader: a sale confirmed
// at the record is never refunded by the reclaimer) and lists its holds by
// deadline (stock.HoldLister: the follow-up that returns copies whose gate
// hold ended unreported), and returns a copy only while it is held
// (stock.HoldReverter: a copy a Confirm made a sale a moment before is
// never refunded by the flow), and, like the gate, gives back part of an
// order and extends a hold (stock.PartialReverter, stock.HoldExtender:
// RevertItems and ExtendHold run at both tiers). package stock/sqlstock's
// Store is one, and so is stock/memstock's.
//
// The wrapping rule of GateStore applies: forward every interface.
type RecordStore interface {
	stock.Manager
	stock.Reclaimer
	stock.OrderReader
	stock.HoldLister
	stock.HoldReverter
	stock.PartialReverter
	stock.HoldExtender
}

// Manager is a stock.Manager, stock.Reclaimer, stock.OrderReader,
// stock.PartialReverter and stock.HoldExtender over a gate and a record.
// It is safe for concurrent use and keeps no state besides its two tiers.
type Manager struct {
	gate   GateStore
	record RecordStore
	cfg    Config
	obs    *observe.Observer // &cfg.Observer
	// halfWay: the IDs of orders Place left half-way (the gate may hold
	// them, the hand-off did not take them), whose retries Admit does not
	// turn away; the last halfWayIDs.
	halfWay *lru.Cache[string, struct{}]
}

// halfWayIDs is how many half-way orders a Manager remembers.
const halfWayIDs = 4096

var (
	_ stock.Manager   = (*Manager)(nil)
	_ stock.Reclaimer = (*Manager)(nil)
)

// New returns a Manager that admits orders at gate and records them in
// record. The types ask for every interface the flow uses, so a tier (or a
// wrapper around one) that lacks one is refused when the program is built,
// never discovered by a reclaimer at run time.
func New(gate GateStore, record RecordStore, cfg Config) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	m := &Manager{gate: gate, record: record, cfg: cfg}
	m.obs = &m.cfg.Observer
	m.halfWay, _ = lru.New[string, struct{}](halfWayIDs) // fails only for a size below 1
	return m
}

// Gate returns the gate tier.
func (m *Manager) Gate() GateStore { return m.gate }

// Record returns the record tier.
func (m *Manager) Record() RecordStore { return m.record }
