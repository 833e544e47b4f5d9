package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// Measures are the figures of one cell, computed at quiescence (every
// deadline past, the reclaimers drained) from the history of calls and
// from the two tiers, read through their public API.
type Measures struct {
	Attempts int // orders tried (order IDs)
	Calls    int // calls made, retries included
	ToldYes  int // orders whose Deduct answered nil

	// Invariants: any non-zero figure fails the cell.
	Oversold      int64 // units held or sold at the record beyond those put on sale
	OverLimit     int64 // units a user holds or bought beyond the per-user limit
	Leaked        int64 // units still held at either tier with every deadline past
	Double        int64 // units the stock rows count that no order's ledger lines explain, or lines beyond an order's items
	LostAcks      int   // calls answered nil whose effect the record does not have
	Misclassified int   // applied (or left held) but answered with an error that says otherwise
	DriftAfter    int64 // |gate available - record available| after the final reconcile
	Late          int   // calls that answered after their bound
	// Stranded: with SaleConfig.RetryFailed, orders whose first Deduct
	// failed with nothing applied and whose retries never got a final
	// answer (taken, or a business refusal).
	Stranded int

	// Allowed, but reported.
	UnknownNotApplied int     // answered ErrUnknownOutcome, provably not applied
	RecordRefusals    int     // orders the gate admitted and the record refused for good
	RefusedLimit      int     // of which for the per-user limit (a gate that lost its per-user counts)
	DriftBefore       int64   // the same as DriftAfter, before the final reconcile
	Mixed             int     // ErrUnknownOutcome together with ErrContention or ErrUnavailable
	FailedFirst       int     // orders whose first Deduct failed and applied nothing (plain, busy, contention, unavailable)
	BoughtOnRetry     int     // of which a later attempt took (SaleConfig.RetryFailed)
	MaxMs             float64 // the slowest call
	Finals            map[string]int
	Notes             []string // the first examples of each failure

	retryFailed bool // the sale's SaleConfig.RetryFailed
}

// Failed lists the invariant figures that are not zero.
func (m Measures) Failed() []string {
	var out []string
	add := func(name string, v int64) {
		if v != 0 {
			out = append(out, fmt.Sprintf("%s=%d", name, v))
		}
	}
	add("oversold", m.Oversold)
	add("over-limit", m.OverLimit)
	add("leaked", m.Leaked)
	add("double", m.Double)
	add("lost-acks", int64(m.LostAcks))
	add("misclassified", int64(m.Misclassified))
	add("drift-after", m.DriftAfter)
	add("late", int64(m.Late))
	add("stranded", int64(m.Stranded))
	return out
}

func (m *Measures) note(format string, args ...any) {
	if len(m.Notes) < 12 {
		m.Notes = append(m.Notes, fmt.Sprintf(format, args...))
	}
}

// orderLog is what the history says of one order.
type orderLog struct {
	user    string
	items   []stock.Item
	final   map[string]string // op -> what the caller knows after its last answer
	unknown map[string]bool   // op -> some attempt answered ErrUnknownOutcome
	// failedFirst: the first Deduct attempt failed and applied nothing.
	failedFirst bool
	errs        map[string]string // op -> text of its last error
	refused     string            // the record refused it: its error
}

// fold reads a history into orders, in the order IDs were first seen.
func fold(events []Event, m *Measures) ([]string, map[string]*orderLog) {
	var ids []string
	orders := map[string]*orderLog{}
	get := func(id string) *orderLog {
		o := orders[id]
		if o == nil {
			o = &orderLog{final: map[string]string{}, errs: map[string]string{}, unknown: map[string]bool{}}
			orders[id] = o
			ids = append(ids, id)
		}
		return o
	}
	m.Finals = map[string]int{}
	for _, e := range events {
		o := get(e.ID)
		switch {
		case e.Op == "record-refused":
			o.refused = e.Err
		case e.Class == "":
			m.Calls++
			if e.Items != nil {
				o.user, o.items = e.User, e.Items
			}
			o.final[e.Op] = ClassInFlight
		default:
			if e.Op == "deduct" && e.Attempt == 0 && nothingApplied(e.Class) {
				o.failedFirst = true
			}
			o.final[e.Op], o.errs[e.Op] = e.Class, e.Err
			switch {
			case e.Class == ClassUnknown || e.Class == ClassMixed:
				o.unknown[e.Op] = true
			case o.unknown[e.Op] && nothingApplied(e.Class):
				// A retry that applied nothing leaves the earlier
				// attempt's outcome unknown.
				o.final[e.Op] = ClassUnknown
			}
			if e.Class == ClassMixed {
				m.Mixed++
			}
			if e.Ms > m.MaxMs {
				m.MaxMs = e.Ms
			}
			if e.Bound > 0 && e.Ms > e.Bound {
				m.Late++
				m.note("late %s %s: %.0fms > %.0fms (%s)", e.Op, e.ID, e.Ms, e.Bound, e.Class)
			}
		}
	}
	return ids, orders
}

// nothingApplied reports whether a class says the call applied nothing.
func nothingApplied(c string) bool {
	return c == ClassPlain || c == ClassContention || c == ClassUnavailable || c == ClassBusy
}

// Tier is what Measure reads of a tier: its levels and its orders.
type Tier interface {
	stock.Manager
	stock.OrderReader
}

// Measure computes the figures of a sale over skus from its history, the
// record and the gate. Drift is left to the caller.
func Measure(ctx context.Context, events []Event, sale SaleConfig, record, gate Tier) (Measures, error) {
	m := Measures{retryFailed: sale.RetryFailed}
	ids, orders := fold(events, &m)
	var placed []string
	for _, id := range ids {
		if orders[id].items != nil {
			placed = append(placed, id)
		}
	}
	m.Attempts = len(placed)
	rec, err := record.Orders(ctx, placed)
	if err != nil {
		return m, fmt.Errorf("record orders: %w", err)
	}
	gs, err := gate.Orders(ctx, placed)
	if err != nil {
		m.note("gate orders unreadable: %v", err)
		gs = make([]stock.OrderInfo, len(placed))
	}
	taken := map[string]int64{}
	perUser := map[[2]string]int64{}
	for i, id := range placed {
		o, rs, g := orders[id], rec[i].State, gs[i].State
		m.classify(id, o, rs, g)
		if !rs.Takes() {
			continue
		}
		want := map[string]int64{}
		for _, it := range o.items {
			want[it.SKU] += it.Qty
		}
		returned := map[string]int64{}
		for _, it := range rec[i].Returned {
			returned[it.SKU] = it.Qty
		}
		for _, it := range rec[i].Items {
			// What partial reverts left of the line is what it takes.
			taken[it.SKU] += it.Qty - returned[it.SKU]
			perUser[[2]string{o.user, it.SKU}] += it.Qty - returned[it.SKU]
			want[it.SKU] -= it.Qty
		}
		for sku, left := range want {
			if left < 0 {
				m.Double -= left
				m.note("order %s holds %d more of %s than it asked", id, -left, sku)
			}
		}
	}
	for k, n := range perUser {
		if sale.Limit > 0 && k[0] != "" && n > sale.Limit {
			m.OverLimit += n - sale.Limit
			m.note("user %s has %d of %s (limit %d)", k[0], n, k[1], sale.Limit)
		}
	}
	for _, sku := range sale.SKUs {
		lv, err := record.Levels(ctx, sku)
		if err != nil {
			return m, fmt.Errorf("record levels %s: %w", sku, err)
		}
		over := max(lv.Held+lv.Sold-sale.Units, taken[sku]-sale.Units, -lv.Available, 0)
		if over > 0 {
			m.Oversold += over
			m.note("%s oversold by %d (record %+v, ledger takes %d)", sku, over, lv, taken[sku])
		}
		if d := lv.Held + lv.Sold - taken[sku]; d != 0 {
			m.Double += abs(d)
			m.note("%s: stock row counts %d taken, the ledger %d", sku, lv.Held+lv.Sold, taken[sku])
		}
		m.Leaked += lv.Held
		if lv.Held > 0 {
			m.note("%s: %d units held at the record past every deadline", sku, lv.Held)
		}
		if gl, err := gate.Levels(ctx, sku); err == nil {
			m.Leaked += gl.Held
			if gl.Held > 0 {
				m.note("%s: %d units held at the gate past every deadline", sku, gl.Held)
			}
		} else {
			m.note("%s: gate levels: %v", sku, err)
		}
	}
	return m, nil
}

// classify scores one order's answers against what the tiers hold.
func (m *Measures) classify(id string, o *orderLog, rs, gs stock.State) {
	d := o.final["deduct"]
	m.Finals[d]++
	if o.failedFirst {
		m.FailedFirst++
		switch {
		case d == ClassOK:
			m.BoughtOnRetry++
		case d != ClassBusiness && m.retryFailed:
			m.Stranded++
			m.note("stranded: deduct %s failed first and ended %s: %s", id, d, o.errs["deduct"])
		}
	}
	applied := rs != stock.StateUnknown || gs != stock.StateUnknown
	switch {
	case d == ClassOK:
		m.ToldYes++
		if rs == stock.StateUnknown {
			m.LostAcks++
			m.note("lost ack: deduct %s told yes, the record does not have it (gate %s)", id, gs)
		}
	case nothingApplied(d) && applied:
		m.Misclassified++
		m.note("misclassified: deduct %s answered %q, record %s, gate %s", id, o.errs["deduct"], rs, gs)
	case d == ClassBusiness && strings.Contains(o.errs["deduct"], stock.ErrHoldExpired.Error()) && !rs.Takes() && !gs.Takes():
		// A repeat of an order whose hold ended (an earlier attempt took
		// it and its reply was lost): the answer says so, and nothing is
		// held.
	case d == ClassBusiness && (rs.Takes() || rs == stock.StateExpired || rs == stock.StateRefunded || gs.Takes()):
		m.Misclassified++
		m.note("misclassified: deduct %s refused (%q), record %s, gate %s", id, o.errs["deduct"], rs, gs)
	case (d == ClassUnknown || d == ClassMixed) && !applied:
		m.UnknownNotApplied++
	}
	if d == ClassBusiness && o.refused != "" {
		m.RecordRefusals++
		if strings.Contains(o.refused, stock.ErrLimitReached.Error()) {
			m.RefusedLimit++
		}
	}
	for _, op := range []string{"confirm", "revert"} {
		if c := o.final[op]; c != "" {
			m.Finals[op+" "+c]++
		}
	}
	switch c := o.final["confirm"]; {
	case c == "":
	case c == ClassOK && rs != stock.StateConfirmed:
		m.LostAcks++
		m.note("lost ack: confirm %s told yes, record %s", id, rs)
	case (nothingApplied(c) || c == ClassBusiness) && rs == stock.StateConfirmed:
		m.Misclassified++
		m.note("misclassified: confirm %s answered %q, record confirmed", id, o.errs["confirm"])
	case (c == ClassUnknown || c == ClassMixed) && rs != stock.StateConfirmed:
		m.UnknownNotApplied++
	}
	switch c := o.final["revert"]; {
	case c == "":
	case c == ClassOK && (rs == stock.StateHeld || rs == stock.StateConfirmed):
		m.LostAcks++
		m.note("lost ack: revert %s told yes, record %s", id, rs)
	case nothingApplied(c) && gs == stock.StateReverted:
		m.Misclassified++
		m.note("misclassified: revert %s answered %q, gate reverted (record %s)", id, o.errs["revert"], rs)
	case (c == ClassUnknown || c == ClassMixed) && rs != stock.StateReverted && gs != stock.StateReverted:
		m.UnknownNotApplied++
	}
}

// Drift is Σ |gate available - record available| over skus; a SKU the
// gate cannot answer for counts the record's whole available count.
func Drift(ctx context.Context, skus []string, gate stock.Manager, record stock.Manager) (int64, error) {
	var n int64
	for _, sku := range skus {
		r, err := record.Available(ctx, sku)
		if err != nil {
			return 0, fmt.Errorf("record available %s: %w", sku, err)
		}
		g, err := gate.Available(ctx, sku)
		if err != nil {
			n += r
			continue
		}
		n += abs(g - r)
	}
	return n, nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
