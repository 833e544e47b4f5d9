package systemtest

import (
	"fmt"
	"strings"
	"time"
)

// The checks a Violation names.
const (
	CheckOversold     = "record-oversold"    // record held+sold > units put on sale + restocked
	CheckConservation = "conservation"       // record available+held+sold is not the units put on sale + restocked
	CheckExactlyOnce  = "exactly-once"       // the record's counts are not the sum of its orders, or an order's lines differ
	CheckGateHolds    = "gate-holds"         // the gate's held units are not its held orders' units
	CheckGateBound    = "gate-bound"         // gate available > record available - in flight
	CheckUserLimit    = "user-limit"         // a user holds or bought more than the SKU's limit
	CheckToldYes      = "told-yes"           // an order told nil is not in the record, or a paying buyer was refused
	CheckRefusal      = "refusal-took-stock" // an order refused for good holds stock
	CheckContract     = "contract"           // an answer the contract rules out (unknown SKU for a SKU on sale, invalid input)
	CheckHeldPastDue  = "held-past-deadline" // after a reclaim, a tier holds an order past its deadline
	CheckDrift        = "drift"              // after the final reconcile, gate available != record available - in flight
	CheckHung         = "hung"               // a step neither finished nor parked within Config.StepTimeout
	CheckNotQuiescent = "quiescence"         // the final reclaim or reconcile kept failing
)

// Violation is one broken promise, found after the step it names.
type Violation struct {
	// Step is the trace step after which it was found (0: the setup,
	// Steps+1 and up: quiescence).
	Step int
	// Check names the promise, one of the Check constants.
	Check string
	// Detail says what was seen.
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("step %d: %s: %s", v.Step, v.Check, v.Detail) }

// Result is what one run saw.
type Result struct {
	// Seed is the run's seed: Config.Seed, or its default.
	Seed uint64
	// Steps is how many steps ran, quiescence included.
	Steps int
	// Violations lists what broke, in the order found; the run stops
	// after the first step that broke anything.
	Violations []Violation
	// Trace is the run's steps, one line each.
	Trace []string
	// Counts tallies what the run did: "orders", "yes", "faults", "parks",
	// "deaths", "flushes", "restarts", "repairs", "reclaims", "restocks".
	Counts map[string]int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// TraceTail is how many trace lines Err shows before the first violation.
const TraceTail = 40

// Err returns nil when no promise broke, else an error naming the seed,
// the violations and the last TraceTail steps up to the first of them.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "systemtest: seed %d: %d violation(s) after %d steps (rerun with STOCKGUARD_SYSTEMTEST_SEED=%d):\n",
		r.Seed, len(r.Violations), r.Steps, r.Seed)
	for _, v := range r.Violations {
		b.WriteString("  " + v.String() + "\n")
	}
	end := min(r.Violations[0].Step+1, len(r.Trace))
	start := max(0, end-TraceTail)
	fmt.Fprintf(&b, "trace (steps %d-%d of seed %d):\n", start, end-1, r.Seed)
	for _, l := range r.Trace[start:end] {
		b.WriteString("  " + l + "\n")
	}
	return fmt.Errorf("%s", strings.TrimRight(b.String(), "\n"))
}

// Summary is a one-line account of the run.
func (r Result) Summary() string {
	c := r.Counts
	return fmt.Sprintf("seed %d: %d steps in %v: %d orders (%d told yes), %d partial returns, %d extensions, %d faults (%d parks, %d deaths), %d flushes, %d restarts, %d repairs, %d reclaims, %d restocks, %d violations",
		r.Seed, r.Steps, r.Elapsed.Round(time.Millisecond), c["orders"], c["yes"], c["returns"], c["extensions"], c["faults"], c["parks"], c["deaths"],
		c["flushes"], c["restarts"], c["repairs"], c["reclaims"], c["restocks"], len(r.Violations))
}
