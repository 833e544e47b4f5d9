package systemtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// call is one call the checker made to the flow, running on its own
// goroutine so that it can park at a hand-off while other steps run.
type call struct {
	kind  string // deduct, confirm, revert, return, extend, reclaim, repair, restock
	node  int
	o     *order
	rs    *restockOp
	ret   stock.Return // a return's
	ext   time.Time    // an extension's deadline
	ctl   *ctl
	start time.Time
	step  int // the step that sent it
	desc  string
	done  chan result
	// wasParked: the call parked at some point, so the clock may have
	// moved while it ran.
	wasParked bool
	// toldYes: when the call was sent, the order had been told yes and
	// no Revert was sent (an earlier call's answer may still arrive late).
	toldYes bool
}

type result struct {
	err error
	got []stock.Reclaimed
}

// reclaimLimit is the limit of every reclaim the checker asks for; a
// batch smaller than it means nothing due was left.
const reclaimLimit = 64

type runner struct {
	cfg   Config
	ctx   context.Context
	rng   *rand.Rand
	flows []Flow
	res   *Result
	step  int
	line  string // the current step's trace line
	stop  bool

	listing  map[string]stock.Listing
	skus     []string
	put      map[string]int64 // units put on sale at the start
	orders   []*order
	restocks []*restockOp
	parked   []*call
	// badReclaim is the step that sent the latest reclaim that failed,
	// died or reached its limit (holds it returned at the gate may still be
	// held at the record, and an order's lines may be half returned at the
	// gate), goodReclaim the step that sent the latest that returned all
	// that was due; 0: none.
	badReclaim, goodReclaim int
	nextID                  int
	// lastErr and lastGot are the answer of the latest call that returned.
	lastErr error
	lastGot int
	// forced is the fault plan of a scripted step's call.
	forced *ctl
	// baseline is the gate's footprint before the first order
	// (Config.Footprint).
	baseline map[string]int64
}

// Run drives the composed flow cfg wires through cfg.Steps random steps
// chosen by cfg.Seed, checking the promises after each, then brings it to
// quiescence (every parked call resumed or its node dead, the clock past
// every deadline, a drained reclaim and a clean reconcile pass) and checks
// again. Broken promises are in the Result (see Result.Err); the error is
// for a run that could not start (a wiring that fails) or a ctx that ended.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	res := Result{Seed: cfg.Seed, Counts: map[string]int{}}
	if cfg.Node == nil || cfg.Gate == nil || cfg.Record == nil || cfg.Clock == nil || cfg.Repair == nil {
		return res, errors.New("systemtest: Config needs Node, Gate, Record, Clock and Repair")
	}
	if cfg.Footprint != nil && cfg.Retention <= 0 {
		return res, errors.New("systemtest: Config.Footprint needs a positive Retention")
	}
	began := time.Now()
	r := &runner{cfg: cfg, ctx: ctx, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), res: &res,
		listing: map[string]stock.Listing{}, put: map[string]int64{}}
	for i := range cfg.Nodes {
		wrapped := 0
		f, err := cfg.Node(i, func(g tiered.GateStore, rec tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			wrapped++
			return wrapGate(g), wrap("record", rec).(tiered.RecordStore)
		})
		switch {
		case err != nil:
			return res, fmt.Errorf("systemtest: node %d: %w", i, err)
		case wrapped != 1:
			return res, fmt.Errorf("systemtest: node %d wrapped its tiers %d times, want once (see Config.Node)", i, wrapped)
		}
		r.flows = append(r.flows, f)
	}
	for _, l := range cfg.Listings {
		if err := r.flows[0].PutOnSale(ctx, l); err != nil {
			return res, fmt.Errorf("systemtest: put %s on sale: %w", l.SKU, err)
		}
		r.listing[l.SKU] = l
		r.skus = append(r.skus, l.SKU)
		r.put[l.SKU] = l.Units
	}
	if err := r.readBaseline(); err != nil {
		return res, err
	}
	r.trace(fmt.Sprintf("#0 seed %d: %d nodes, %v on sale", cfg.Seed, cfg.Nodes, r.put))
	r.checkState()
	steps := cfg.Steps
	if cfg.Script != nil {
		steps = len(cfg.Script)
	}
	for r.step = 1; r.step <= steps && !r.stop && ctx.Err() == nil; r.step++ {
		r.line = fmt.Sprintf("#%d %s", r.step, r.clockText())
		began := time.Now()
		if cfg.Script != nil {
			if err := r.scripted(cfg.Script[r.step-1]); err != nil {
				r.release()
				return res, err
			}
		} else {
			r.randomStep()
		}
		if d := time.Since(began); d > 200*time.Millisecond {
			r.line += fmt.Sprintf(" (%v)", d.Round(time.Millisecond))
		}
		r.trace(r.line)
		if !r.stop {
			r.checkState()
		}
	}
	if !r.stop && ctx.Err() == nil {
		r.quiesce()
	}
	r.release()
	res.Steps = len(res.Trace) - 1
	res.Elapsed = time.Since(began)
	return res, ctx.Err()
}

func (r *runner) trace(line string) {
	r.res.Trace = append(r.res.Trace, line)
	if r.cfg.Logf != nil {
		r.cfg.Logf("%s", line)
	}
}

func (r *runner) now() time.Time { return r.cfg.Clock.Now() }

func (r *runner) clockText() string {
	return "t=" + r.now().Format("15:04:05.000")
}

func (r *runner) violate(check, format string, args ...any) {
	r.res.Violations = append(r.res.Violations, Violation{Step: r.step, Check: check, Detail: fmt.Sprintf(format, args...)})
	r.stop = true
}

// launch sends c with its fault plan and waits until it returns or parks.
func (r *runner) launch(c *call, fn func(ctx context.Context) result) {
	ctx, cancel := context.WithCancel(r.ctx)
	c.ctl.cancel = cancel
	ctx = context.WithValue(ctx, ctlKey{}, c.ctl)
	c.done = make(chan result, 1)
	c.start, c.step = r.now(), r.step
	if c.o != nil {
		c.toldYes = c.o.yes && !c.o.revertSent
	}
	if c.ctl.faulty() {
		r.res.Counts["faults"]++
	}
	go func() {
		defer cancel()
		c.done <- fn(ctx)
	}()
	r.await(c)
}

// await waits for c to return (and books its result) or to park.
func (r *runner) await(c *call) {
	t := time.NewTimer(r.cfg.StepTimeout)
	defer t.Stop()
	select {
	case res := <-c.done:
		r.finish(c, res)
	case <-c.ctl.parked:
		r.res.Counts["parks"]++
		c.wasParked = true
		r.parked = append(r.parked, c)
		r.hold(c, +1)
		r.line += " → parked at " + c.ctl.path()
	case <-t.C:
		r.line += " → hung at " + c.ctl.path()
		r.violate(CheckHung, "%s did not return or park within %v (at %s)", c.desc, r.cfg.StepTimeout, c.ctl.path())
	}
}

// hold counts c as parked (+1) or no longer parked (-1) on what it names.
func (r *runner) hold(c *call, d int) {
	if c.o != nil {
		c.o.parked += d
	}
	if c.rs != nil {
		c.rs.parked += d
	}
}

// resumeCall lets a parked call go on (or its node die) and waits for it.
func (r *runner) resumeCall(i int, goOn bool) {
	c := r.parked[i]
	r.parked = append(r.parked[:i], r.parked[i+1:]...)
	r.hold(c, -1)
	verb := "resume"
	if !goOn {
		verb = "kill"
		r.res.Counts["deaths"]++
	}
	r.line += fmt.Sprintf(" %s #%d %s", verb, c.step, c.desc)
	c.ctl.resume <- goOn
	r.await(c)
}

// release ends every call still parked: their nodes die.
func (r *runner) release() {
	for _, c := range r.parked {
		c.ctl.resume <- false
		select {
		case <-c.done:
		case <-time.After(r.cfg.StepTimeout):
		}
	}
	r.parked = nil
}

// pickFault chooses the fault of one call: kinds lists those that apply.
func (r *runner) pickFault(kinds []fault) *ctl {
	if r.forced != nil {
		return r.forced
	}
	if r.cfg.FaultRate < 0 || r.rng.Float64() >= r.cfg.FaultRate {
		return newCtl()
	}
	f := kinds[r.rng.IntN(len(kinds))]
	if (f == nodeParks || f == redisParks) && len(r.parked) >= 2 {
		f = kinds[0]
	}
	at := 1 + r.rng.IntN(3)
	if f.atRedis() {
		at = 1 + r.rng.IntN(8)
	}
	return newCtl(plan{f: f, at: at})
}

var (
	flowFaults   = []fault{gateLost, gateDown, recordDown, recordLost, nodeDies, nodeParks, redisLost, redisResend, redisDies, redisParks}
	deductFaults = append([]fault{recordRefuse}, flowFaults...)
	repairFaults = []fault{redisParks, redisDies, redisLost, redisResend}
)

func faultText(c *ctl) string {
	if !c.faulty() {
		return ""
	}
	var fs []string
	for _, p := range c.plans {
		fs = append(fs, fmt.Sprintf("%v@%d", p.f, p.at))
	}
	return " [" + strings.Join(fs, ",") + "]"
}

// errText is the short name of an outcome, for the trace.
func errText(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, errInjected) && !errors.Is(err, stock.ErrUnknownOutcome) && !stock.IsBusiness(err):
		return "injected(" + shorten(err.Error()) + ")"
	}
	for _, e := range []error{stock.ErrSoldOut, stock.ErrLimitReached, stock.ErrUnknownSKU, stock.ErrUnknownOrder,
		stock.ErrConflict, stock.ErrHoldExpired, stock.ErrOrderClosed, stock.ErrInvalid} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	for _, e := range []struct {
		err  error
		name string
	}{{stock.ErrUnknownOutcome, "unknown-outcome"}, {stock.ErrUnavailable, "unavailable"}, {stock.ErrContention, "contention"}} {
		if errors.Is(err, e.err) {
			if errors.Is(err, errInjected) {
				return e.name + " (injected)"
			}
			return e.name + ": " + shorten(err.Error())
		}
	}
	return shorten(err.Error())
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
}
