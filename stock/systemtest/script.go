package systemtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Step is one step of a scripted run (Config.Script): the interleaving a
// test wants, with the faults it wants, checked like a random run.
type Step struct {
	// Op is what the step does:
	//
	//	buy      a new order of Items by User on Node
	//	pay      Confirm of the Order-th order bought (1-based) on Node
	//	cancel   Revert of that order on Node
	//	deduct   Deduct of that order again (a retry, or a redelivery)
	//	tick     the clock moves by Tick
	//	reclaim  Node's ReclaimExpired
	//	repair   a reconcile pass over SKUs (default: every SKU)
	//	restock  Units more of SKU under a new operation ID, on Node
	//	restock-again  the Restock-th restock (1-based) again, same ID
	//	flush    the gate loses its data (Config.Flush)
	//	restart  the gate's server restarts (Config.Restart)
	//	resume   the call the Call-th step sent (parked) goes on
	//	kill     that call's node dies
	Op   string
	Node int
	// Items and User are the lines and buyer of a buy.
	Items []stock.Item
	User  string
	// Order names an earlier buy: 1 is the script's first.
	Order int
	// SKU and Units are a restock's; Restock names an earlier one.
	SKU     string
	Units   int64
	Restock int
	// SKUs are the SKUs a repair passes over; nil means all of them.
	SKUs []string
	// Tick is how far a tick moves the clock.
	Tick time.Duration
	// Call names the step that sent the call to resume or kill.
	Call int
	// Faults are the faults of the step's call, each "kind@n": the kind
	// applies at the n-th hand-off it counts. Kinds: gate-down, gate-lost,
	// record-down, record-lost, record-refuses, dies, parks (these count
	// the calls to the tiers: gate-* the gate's, record-* the record's,
	// record-refuses the record's Deducts, dies and parks all of them),
	// redis-lost, redis-resend, redis-dies, redis-parks (these count Redis
	// commands and pipelines, through RedisHook).
	Faults []string
}

// parseFaults turns Step.Faults into the call's plan.
func parseFaults(fs []string) (*ctl, error) {
	var plans []plan
	for _, s := range fs {
		name, n, ok := strings.Cut(s, "@")
		at, err := strconv.Atoi(n)
		i := slices.Index(faultNames[:], name)
		if !ok || err != nil || at < 1 || i <= 0 {
			return nil, fmt.Errorf("systemtest: fault %q is not kind@n", s)
		}
		plans = append(plans, plan{f: fault(i), at: at})
	}
	return newCtl(plans...), nil
}

// scripted takes one step of Config.Script.
func (r *runner) scripted(s Step) error {
	c, err := parseFaults(s.Faults)
	if err != nil {
		return err
	}
	r.forced = c
	defer func() { r.forced = nil }()
	nth := func(i int) (*order, error) {
		var buys []*order
		for _, o := range r.orders {
			if o.scripted {
				buys = append(buys, o)
			}
		}
		if i < 1 || i > len(buys) {
			return nil, fmt.Errorf("systemtest: step %d: no order %d", r.step, i)
		}
		return buys[i-1], nil
	}
	if s.Node < 0 || s.Node >= len(r.flows) {
		return fmt.Errorf("systemtest: step %d: no node %d", r.step, s.Node)
	}
	switch s.Op {
	case "buy":
		r.newOrder(s.User, s.Items, s.Node)
	case "pay", "cancel", "deduct":
		o, err := nth(s.Order)
		if err != nil {
			return err
		}
		map[string]func(*order, int){"pay": r.confirm, "cancel": r.revert, "deduct": r.deduct}[s.Op](o, s.Node)
	case "tick":
		r.cfg.Clock.Advance(s.Tick)
		r.line += fmt.Sprintf(" tick +%v", s.Tick)
	case "reclaim":
		r.reclaimOn(s.Node)
	case "repair":
		r.repairOf(s.SKUs)
	case "restock":
		r.nextID++
		rs := &restockOp{r: stock.Restock{OpID: fmt.Sprintf("op%d", r.nextID), SKU: s.SKU, Units: s.Units}}
		r.restocks = append(r.restocks, rs)
		r.res.Counts["restocks"]++
		r.sendRestockOn(rs, s.Node)
	case "restock-again":
		if s.Restock < 1 || s.Restock > len(r.restocks) {
			return fmt.Errorf("systemtest: step %d: no restock %d", r.step, s.Restock)
		}
		r.sendRestockOn(r.restocks[s.Restock-1], s.Node)
	case "flush", "restart":
		if (s.Op == "flush" && r.cfg.Flush == nil) || (s.Op == "restart" && r.cfg.Restart == nil) {
			return fmt.Errorf("systemtest: step %d: %s is not wired", r.step, s.Op)
		}
		if s.Op == "flush" {
			r.flush()
		} else {
			r.restart()
		}
	case "resume", "kill":
		i := slices.IndexFunc(r.parked, func(c *call) bool { return c.step == s.Call })
		if i < 0 {
			r.line += fmt.Sprintf(" %s #%d: not parked", s.Op, s.Call)
			return nil
		}
		r.resumeCall(i, s.Op == "resume")
	default:
		return fmt.Errorf("systemtest: step %d: unknown op %q", r.step, s.Op)
	}
	return nil
}
