package stockguard

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// Config configures a Shop. The zero value is a complete shop: a gate
// under the prefix "sg" (redisstock's default), the record in the tables "stock" and
// "stockguard_ledger" (in the dialect the database says it speaks), a
// synchronous hand-off, a breaker that opens after five failures, and
// reconciliation every minute.
//
// Each part's own Config is here for the settings that are the part's
// alone. The settings two parts must agree on are derived by New, and a
// part Config that sets one of them is refused (stock.ErrInvalid): the
// clock and the observer of every part (Clock, Observer), the gate's hold
// time that reconciliation rebuilds from the record's
// (reconcile.Config.GateHold, from the flow's grace), the breaker's
// recalibration (a reconcile pass) and its fallback (the flow's record),
// and with a Handoff, the flow's Recorder, the hold times of its messages
// (the gate's) and the lag its backpressure reads (the broker's, or the
// Shop's consumers').
type Config struct {
	// Gate configures the Redis gate (package stock/redisstock): Prefix,
	// Retention, MaxBatch, replication waits. Clock and Observer must be
	// zero.
	Gate redisstock.Config
	// Record configures the SQL record (package stock/sqlstock): tables,
	// columns, strategy, LockWait, grouping. A zero Dialect is found from
	// the driver and, on go-sql-driver/mysql, by asking the server; set it
	// for a driver sqlstock.New cannot tell (one wrapped for tracing).
	// Clock and Observer must be zero.
	Record sqlstock.Config
	// Flow configures the order flow (package stock/tiered): the hand-off
	// (Recorder: your queue, whose consumer calls Shop.Settle; or set
	// Handoff instead), RecordGrace, RecheckAfter, and OnDrift, which is
	// called besides the Shop's own repair of the SKUs a drift names.
	// Clock and Observer must be zero. RecordGrace must be zero (the
	// grace is then each listing's hold time: see PutOnSale) or longer
	// than the reclaimer's interval (Reclaim.Interval); a negative one,
	// which the flow would take as zero, is refused.
	Flow tiered.Config
	// Handoff, if set, hands the orders the gate holds to the record
	// through a broker (package handoff): New makes the flow's Recorder a
	// handoff.Recorder publishing to Handoff, with the gate's hold times,
	// and its backpressure reads the broker's lag (handoff.OldestReader,
	// where Handoff implements it) or else that of the consumers made by
	// Shop.Consumer. Flow.Recorder must then be nil. Run the consumers
	// with Shop.Consumer.
	Handoff handoff.Publisher
	// HandoffRecorder configures that Recorder: MaxLag, HoldCache and
	// LagCache. Clock and Lag must be zero: they are the Shop's.
	HandoffRecorder handoff.RecorderConfig
	// Breaker configures the circuit breaker around the gate (package
	// degrade): when it opens, the fallback rate, the ramp back. Clock,
	// Observer and Recalibrate must be zero: the Shop recalibrates the
	// gate with a reconcile pass before traffic returns to it.
	Breaker degrade.Config
	// Reconcile configures reconciliation (package reconcile): how often
	// Run makes a full pass, how large a correction its passes and repairs
	// apply by themselves (MaxAutoFix; the breaker's recalibration applies
	// any, as the record is the truth the gate must follow before traffic
	// returns to it). Clock, Observer and GateHold must be zero, and
	// DryRun false: for dry runs, make a Reconciler of your own with
	// Shop.NewReconciler.
	Reconcile reconcile.Config
	// Reclaim configures the reclaimer Run drives (stock.RunReclaimer):
	// its Interval must be shorter than a RecordGrace you set.
	Reclaim stock.ReclaimerConfig
	// OnError, if set, receives the failures of Run's background work
	// (a reclaim pass, a reconcile pass or check, a repair): each is
	// retried by itself. Reclaim.OnError and Reconcile.OnError, if set,
	// receive those of their part instead.
	OnError func(error)
	// Observer receives the calls, batches, breaker changes and
	// corrections of every part (package observe; otelstock turns them
	// into OpenTelemetry); the zero value reports nothing.
	Observer observe.Observer
	// Clock is the time every part reads; default stock.SystemClock.
	Clock stock.Clock
	// Wrap, if set, wraps the gate and the record as the flow uses them
	// (tracing, fault injection). A wrapper must forward every interface
	// of the store it wraps (see package stock); reconciliation reads the
	// stores themselves.
	Wrap func(gate tiered.GateStore, record tiered.RecordStore) (tiered.GateStore, tiered.RecordStore)
}

// Shop is the standard flow, built by New: orders are admitted by a Redis
// gate and recorded in a SQL record (package stock/tiered), behind a
// circuit breaker that sends them to the record alone while Redis fails
// (package degrade), with reconciliation repairing the gate from the
// record (package reconcile) and reclaimers returning unpaid holds (Run).
//
// A Shop is a stock.Manager through its embedded *degrade.Manager: Deduct
// (and Place), Confirm, Revert, RevertItems, ExtendHold, PutOnSale,
// Restock, Available, Levels, Orders, UserUnits and ReclaimExpired, plus
// the breaker's SetMode and State. It is safe for concurrent use, and any
// number of Shops on any number of nodes may share one Redis and one
// database.
type Shop struct {
	*degrade.Manager

	gate   *redisstock.Store
	record *sqlstock.Store
	flow   *tiered.Manager
	rec    *reconcile.Reconciler
	cfg    Config

	mu        sync.Mutex
	consumers []*handoff.Consumer // made by Consumer: the lag the Recorder reads
	dirty     map[string]bool     // SKUs a drift named, to repair
	all       bool                // a drift named no SKU: repair every one
	kick      chan struct{}
}

var (
	_ stock.Manager         = (*Shop)(nil)
	_ stock.Reclaimer       = (*Shop)(nil)
	_ stock.OrderReader     = (*Shop)(nil)
	_ stock.PartialReverter = (*Shop)(nil)
	_ stock.HoldExtender    = (*Shop)(nil)
)

// New builds a Shop over the Redis client rdb (a *redis.Client,
// *redis.ClusterClient, Ring or failover client; see
// redisstock.FailFast for the options of a client that fails fast) and the
// database db (sql.Open's *sql.DB, or pgx's stdlib.OpenDBFromPool on a
// pgxpool.Pool; see sqlstock.New for the drivers whose dialect it tells,
// and Config.Record.Dialect for the others). It sends nothing to either:
// create the tables with CreateTables, then start Run. It fails with an
// error wrapping stock.ErrInvalid, having built nothing, for a nil client
// or database, a driver whose dialect it cannot tell, a part Config that
// sets a setting New derives, and settings that contradict each other.
func New(rdb redis.UniversalClient, db *sql.DB, cfg Config) (*Shop, error) {
	if db == nil {
		return nil, &stock.InvalidError{Field: "stockguard.New db", Reason: "nil"}
	}
	return build(rdb, cfg, func(rc sqlstock.Config) (*sqlstock.Store, error) { return sqlstock.New(db, rc) })
}

// NewSqlx is New over db.DB, whose dialect is read from the name its
// driver was opened under (see sqlstock.NewSqlx).
//
// Deprecated: use New with db.DB.
func NewSqlx(rdb redis.UniversalClient, db *sqlx.DB, cfg Config) (*Shop, error) {
	if db == nil || db.DB == nil {
		return nil, &stock.InvalidError{Field: "stockguard.NewSqlx db", Reason: "nil"}
	}
	return build(rdb, cfg, func(rc sqlstock.Config) (*sqlstock.Store, error) { return sqlstock.NewSqlx(db, rc) })
}

// build builds a Shop over rdb and the record newRecord returns.
func build(rdb redis.UniversalClient, cfg Config, newRecord func(sqlstock.Config) (*sqlstock.Store, error)) (*Shop, error) {
	if rdb == nil {
		return nil, &stock.InvalidError{Field: "stockguard.New rdb", Reason: "nil"}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	s := &Shop{cfg: cfg, dirty: map[string]bool{}, kick: make(chan struct{}, 1)}

	gc := cfg.Gate
	gc.Clock, gc.Observer = cfg.Clock, cfg.Observer
	gate, err := redisstock.New(rdb, gc)
	if err != nil {
		return nil, err
	}
	rc := cfg.Record
	rc.Clock, rc.Observer = cfg.Clock, cfg.Observer
	record, err := newRecord(rc)
	if err != nil {
		return nil, err
	}
	s.gate, s.record = gate, record

	fc := cfg.Flow
	fc.Clock, fc.Observer = cfg.Clock, cfg.Observer
	fc.OnDrift = func(d tiered.Drift) {
		s.mark(d.SKUs)
		if cfg.Flow.OnDrift != nil {
			cfg.Flow.OnDrift(d)
		}
	}
	if cfg.Handoff != nil {
		hc := cfg.HandoffRecorder
		hc.Clock, hc.Lag = cfg.Clock, s.consumerLag
		fc.Recorder = handoff.NewRecorder(cfg.Handoff, gate, hc)
	}
	var g tiered.GateStore = gate
	var r tiered.RecordStore = record
	if cfg.Wrap != nil {
		if g, r = cfg.Wrap(g, r); g == nil || r == nil {
			return nil, &stock.InvalidError{Field: "stockguard.Config.Wrap", Reason: "returned a nil gate or record"}
		}
	}
	s.flow = tiered.New(g, r, fc)

	kc := cfg.Reconcile
	kc.Clock, kc.Observer, kc.GateHold = cfg.Clock, cfg.Observer, s.flow.GateHold
	if kc.OnError == nil {
		kc.OnError = cfg.OnError
	}
	if s.rec, err = reconcile.New(gate, record, kc); err != nil {
		return nil, err
	}
	// The recalibration before traffic returns to the gate fixes any size:
	// the drift of an outage is explained (the record took orders alone),
	// and a gate left out of agreement would keep the shop on the fallback
	// until a person acts.
	kc.MaxAutoFix = -1
	recal, err := reconcile.New(gate, record, kc)
	if err != nil {
		return nil, err
	}

	bc := cfg.Breaker
	bc.Clock, bc.Observer, bc.Recalibrate = cfg.Clock, cfg.Observer, recal.Recalibrate
	if s.Manager, err = degrade.New(s.flow, nil, bc); err != nil {
		return nil, err
	}
	return s, nil
}

// check refuses a Config that sets what New derives, or whose settings
// contradict each other.
func (cfg Config) check() error {
	derived := []struct {
		field string
		set   bool
	}{
		{"Gate.Clock", cfg.Gate.Clock != nil},
		{"Gate.Observer", !isZero(cfg.Gate.Observer)},
		{"Record.Clock", cfg.Record.Clock != nil},
		{"Record.Observer", !isZero(cfg.Record.Observer)},
		{"Flow.Clock", cfg.Flow.Clock != nil},
		{"Flow.Observer", !isZero(cfg.Flow.Observer)},
		{"Breaker.Clock", cfg.Breaker.Clock != nil},
		{"Breaker.Observer", !isZero(cfg.Breaker.Observer)},
		{"Breaker.Recalibrate", cfg.Breaker.Recalibrate != nil},
		{"Reconcile.Clock", cfg.Reconcile.Clock != nil},
		{"Reconcile.Observer", !isZero(cfg.Reconcile.Observer)},
		{"Reconcile.GateHold", cfg.Reconcile.GateHold != nil},
		{"HandoffRecorder.Clock", cfg.HandoffRecorder.Clock != nil},
		{"HandoffRecorder.Lag", cfg.HandoffRecorder.Lag != nil},
	}
	for _, d := range derived {
		if d.set {
			return &stock.InvalidError{Field: "stockguard.Config." + d.field,
				Reason: "set by New for every part alike (see Config): leave it zero"}
		}
	}
	if cfg.Handoff != nil && cfg.Flow.Recorder != nil {
		return &stock.InvalidError{Field: "stockguard.Config.Flow.Recorder",
			Reason: "set beside Handoff, which makes the Recorder: set one of them"}
	}
	if cfg.Handoff == nil && (cfg.HandoffRecorder.MaxLag != 0 || cfg.HandoffRecorder.HoldCache != 0 || cfg.HandoffRecorder.LagCache != 0) {
		return &stock.InvalidError{Field: "stockguard.Config.HandoffRecorder",
			Reason: "configures the Recorder of a Handoff, and Handoff is nil"}
	}
	if cfg.Reconcile.DryRun {
		return &stock.InvalidError{Field: "stockguard.Config.Reconcile.DryRun",
			Reason: "a dry run changes nothing, so it cannot recalibrate the gate before traffic returns to it: make a Reconciler of your own for dry runs with Shop.NewReconciler"}
	}
	if g := cfg.Flow.RecordGrace; g < 0 {
		return &stock.InvalidError{Field: "stockguard.Config.Flow.RecordGrace",
			Reason: fmt.Sprintf("%v is negative: leave it zero for a grace of the hold time, or set one longer than the reclaimer's interval", g)}
	}
	reclaim := reclaimInterval(cfg)
	if g := cfg.Flow.RecordGrace; g > 0 && g <= reclaim {
		return &stock.InvalidError{Field: "stockguard.Config.Flow.RecordGrace",
			Reason: fmt.Sprintf("%v is not longer than the reclaimer's interval %v: the record would end holds the gate still counts", g, reclaim)}
	}
	return nil
}

// reclaimInterval is how often Run's reclaimer makes a pass.
func reclaimInterval(cfg Config) time.Duration {
	if cfg.Reclaim.Interval > 0 {
		return cfg.Reclaim.Interval
	}
	return time.Second
}

// PutOnSale puts l on sale through the breaker and the flow
// (degrade.Manager.PutOnSale). With Config.Flow.RecordGrace zero, the
// grace of the SKU's holds at the record is the listing's hold time (see
// tiered.Config.RecordGrace), which must then be longer than the
// reclaimer's interval, as a RecordGrace you set must: a listing whose
// hold time (DefaultHoldTTL for a zero one) is not is refused with an
// error wrapping stock.ErrInvalid, with nothing written. The record's
// deadlines are capped at stock.MaxHoldTTL from the Deduct, which leaves
// a hold near the cap less grace: a listing whose longest hold (its
// MaxHoldTTL, or its hold time) comes within the reclaimer's interval of
// stock.MaxHoldTTL is refused the same way.
//
// With RecordGrace zero the flow reads an order's gate deadline back from
// the record's by the SKU's hold time as it is when it reads, so a new
// hold time moves it for the held orders the gate does not know (taken at
// the record alone while Redis was down, or lost in a flush): a longer one
// ends them early, a shorter one keeps them longer. Set
// Config.Flow.RecordGrace to change hold times while such orders may be
// held.
func (s *Shop) PutOnSale(ctx context.Context, l stock.Listing) error {
	if err := l.Validate(); err != nil {
		return err
	}
	hold := l.EffectiveHoldTTL()
	reclaim := reclaimInterval(s.cfg)
	if s.cfg.Flow.RecordGrace == 0 && hold <= reclaim {
		return &stock.InvalidError{Field: "stock.Listing.HoldTTL",
			Reason: fmt.Sprintf("%v is not longer than the reclaimer's interval %v, and the record's grace is the hold time (Config.Flow.RecordGrace is zero): the record would end holds the gate still counts; set a longer hold time or a RecordGrace", hold, reclaim)}
	}
	field, longest := "stock.Listing.HoldTTL", l.EffectiveMaxHoldTTL()
	if l.MaxHoldTTL != 0 {
		field = "stock.Listing.MaxHoldTTL"
	}
	if stock.MaxHoldTTL-longest <= reclaim {
		return &stock.InvalidError{Field: field,
			Reason: fmt.Sprintf("%v leaves the record %v of grace before stock.MaxHoldTTL %v caps its deadline, not longer than the reclaimer's interval %v: the record would end holds the gate still counts; set a shorter one", longest, stock.MaxHoldTTL-longest, stock.MaxHoldTTL, reclaim)}
	}
	return s.Manager.PutOnSale(ctx, l)
}

// isZero reports whether o reports nothing.
func isZero(o observe.Observer) bool {
	return o.Begin == nil && o.End == nil && o.Batch == nil && o.Reclaim == nil &&
		o.Breaker == nil && o.Correction == nil && o.Limit == nil && o.Handoff == nil
}

// Settle records an order the gate holds: the consumer of the queue that
// Config.Flow.Recorder feeds calls it (see tiered.Manager.Settle).
func (s *Shop) Settle(ctx context.Context, o stock.Order) error { return s.flow.Settle(ctx, o) }

// HeldUntil tells until when the gate holds an order (see
// tiered.Manager.HeldUntil): the Shop is a handoff.HoldReader, so its
// consumers (Consumer, or handoff.NewConsumer over the Shop) keep
// retrying an order whose hold was extended after it was handed off,
// for as long as the gate holds it.
func (s *Shop) HeldUntil(ctx context.Context, orderID string) (time.Time, error) {
	return s.flow.HeldUntil(ctx, orderID)
}

// Consumer returns a handoff.Consumer that settles what src delivers
// into the Shop (Settle): the consumer of the queue Config.Handoff feeds,
// one per Source; start its Run. Its clock and observer are the Shop's,
// and its lag is among those the Shop's Recorder reads (where the broker
// cannot tell its own), so make consumers for the Shop's lifetime; one
// whose Run returned, or whose Fetch keeps failing, reports no lag (see
// handoff.Consumer.Lag), so it does not hold new orders back. A zero
// cfg.Batch is the record's group (Config.Record.MaxGroup, sqlstock's
// default 64), so that a batch is written in one transaction. It fails
// with an error wrapping stock.ErrInvalid, having made nothing, for a nil
// src, a cfg that sets Clock or Observer, or a Batch larger than the
// record's group.
func (s *Shop) Consumer(src handoff.Source, cfg handoff.ConsumerConfig) (*handoff.Consumer, error) {
	if src == nil {
		return nil, &stock.InvalidError{Field: "stockguard.Shop.Consumer src", Reason: "nil"}
	}
	if cfg.Clock != nil || !isZero(cfg.Observer) {
		return nil, &stock.InvalidError{Field: "stockguard.Shop.Consumer cfg.Clock/Observer",
			Reason: "set by the Shop (Config.Clock, Config.Observer): leave them zero"}
	}
	group := s.cfg.Record.MaxGroup
	if group <= 0 {
		group = sqlstock.DefaultMaxGroup
	}
	switch {
	case cfg.Batch == 0:
		cfg.Batch = group
	case cfg.Batch > group:
		return nil, &stock.InvalidError{Field: "stockguard.Shop.Consumer cfg.Batch",
			Reason: fmt.Sprintf("%d is more than the record writes in one transaction (Config.Record.MaxGroup %d)", cfg.Batch, group)}
	}
	cfg.Clock, cfg.Observer = s.cfg.Clock, s.cfg.Observer
	c, err := handoff.NewConsumer(src, s, cfg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.consumers = append(s.consumers, c)
	s.mu.Unlock()
	return c, nil
}

// consumerLag is the largest lag of the Shop's consumers.
func (s *Shop) consumerLag() time.Duration {
	s.mu.Lock()
	cs := s.consumers
	s.mu.Unlock()
	return handoff.LagOf(cs...)()
}

// CreateTables creates the record's tables if they do not exist (see
// sqlstock.Store.CreateTables).
func (s *Shop) CreateTables(ctx context.Context) error { return s.record.CreateTables(ctx) }

// Gate returns the Redis gate. A Reconciler over it is made with
// NewReconciler, which gives it the flow's gate hold times.
func (s *Shop) Gate() *redisstock.Store { return s.gate }

// Record returns the SQL record, the truth.
func (s *Shop) Record() *sqlstock.Store { return s.record }

// Flow returns the order flow over the gate and the record, without the
// breaker.
func (s *Shop) Flow() *tiered.Manager { return s.flow }

// Reconciler returns the reconciler Run drives, with Config.Reconcile's
// limits (a drift past MaxAutoFix is reported, not fixed). The breaker
// recalibrates with one of its own over the same gate and record that
// fixes drift of any size (MaxAutoFix -1): traffic returns to the gate
// only once it agrees with the record.
func (s *Shop) Reconciler() *reconcile.Reconciler { return s.rec }

// NewReconciler returns a Reconciler of your own over the Shop's gate and
// record (a dry run, a pass with other limits), with the settings it must
// share with the Shop derived as New derives them for Run's: the Shop's
// Clock and Observer, and the gate hold times the flow gives the gate
// (reconcile.Config.GateHold is the flow's tiered.Manager.GateHold, so a
// pass, a rebuild or a warm-up gives the gate the listings' hold times
// whatever Config.Flow.RecordGrace is). OnError defaults to
// Config.OnError. Build a Reconciler over a Shop's stores this way:
// reconcile.New(shop.Gate(), shop.Record(), cfg) cannot know the Shop's
// grace and takes the default flow's (the record holding twice as long as
// the gate). It fails with an error wrapping stock.ErrInvalid, having
// made nothing, for a cfg that sets Clock, Observer or GateHold.
func (s *Shop) NewReconciler(cfg reconcile.Config) (*reconcile.Reconciler, error) {
	if cfg.Clock != nil || !isZero(cfg.Observer) || cfg.GateHold != nil {
		return nil, &stock.InvalidError{Field: "stockguard.Shop.NewReconciler cfg.Clock/Observer/GateHold",
			Reason: "set by the Shop (Config.Clock, Config.Observer, the flow's GateHold): leave them zero"}
	}
	cfg.Clock, cfg.Observer, cfg.GateHold = s.cfg.Clock, s.cfg.Observer, s.flow.GateHold
	if cfg.OnError == nil {
		cfg.OnError = s.cfg.OnError
	}
	return reconcile.New(s.gate, s.record, cfg)
}
