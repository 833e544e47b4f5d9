package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// reason is why an attempt was turned away.
type reason string

const (
	reasonSoldOut     reason = "sold_out"
	reasonLimit       reason = "limit"
	reasonRateLimited reason = "rate_limited"
	reasonBusy        reason = "busy"
	reasonUnavailable reason = "unavailable"
)

var reasons = []reason{reasonSoldOut, reasonLimit, reasonRateLimited, reasonBusy, reasonUnavailable}

// stats are the counters the sale updates while it runs.
type stats struct {
	orders          atomic.Int64 // attempts that took a hold
	taken           atomic.Int64 // units of those holds
	paid            atomic.Int64 // orders confirmed
	latePay         atomic.Int64 // payments refused: the hold had expired
	expiredInQueue  atomic.Int64 // hand-offs that reached the record too late
	refusedByRecord atomic.Int64 // hand-offs the record refused for good
	degraded        atomic.Int64 // orders the record took while the breaker was open

	mu       sync.Mutex
	rejected map[reason]int64
	soldOut  map[string]int64 // sold-out refusals per SKU
	attempts int64
	lat      []time.Duration // of the attempts the limiter let through
}

func newStats(attempts int) *stats {
	return &stats{rejected: map[reason]int64{}, soldOut: map[string]int64{}, lat: make([]time.Duration, 0, attempts)}
}

// refusedSoldOut counts a buyer of sku told it is sold out.
func (s *stats) refusedSoldOut(sku string) {
	s.mu.Lock()
	s.soldOut[sku]++
	s.mu.Unlock()
}

// soldOutOf returns the sold-out refusals of sku so far.
func (s *stats) soldOutOf(sku string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.soldOut[sku]
}

// attempt records one finished attempt. Its latency counts only when the
// limiter let it through: a local refusal costs microseconds and would
// hide what the stock path costs.
func (s *stats) attempt(r reason, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if r != "" {
		s.rejected[r]++
	}
	if r != reasonRateLimited {
		s.lat = append(s.lat, d)
	}
}

// report is what the sale prints: a table, or with -json one object.
type report struct {
	Backend     string           `json:"backend"`
	SKUs        int              `json:"skus"`
	OnSale      int64            `json:"on_sale"`
	Attempts    int              `json:"attempts"`
	Orders      int64            `json:"orders"`
	Sold        int64            `json:"sold"`
	Returned    int64            `json:"returned"`
	Resold      int64            `json:"resold"`
	Held        int64            `json:"held"`
	Available   int64            `json:"available"`
	Rejected    map[reason]int64 `json:"rejected"`
	Unpaid      int64            `json:"unpaid_orders"`
	LatePay     int64            `json:"late_payments"`
	Refused     int64            `json:"refused_by_record"`
	Expired     int64            `json:"expired_in_queue"`
	Redelivered int64            `json:"redelivered"`
	// Queue names the hand-off's broker; Handoffs is the deliveries its
	// consumers ended, LagP50ms and LagP99ms their lag from publish to
	// record, ExpiredDelivered those delivered past their gate deadline
	// (Expired counts those whose Settle found the hold ended).
	Queue            string  `json:"queue"`
	Handoffs         int64   `json:"handoffs"`
	LagP50ms         float64 `json:"handoff_lag_p50_ms"`
	LagP99ms         float64 `json:"handoff_lag_p99_ms"`
	ExpiredDelivered int64   `json:"expired_delivered"`
	DeadLetters      int64   `json:"dead_letters"`
	Degraded         int64   `json:"degraded_orders"`
	Repaired         int64   `json:"repaired_units"`
	Reconciled       int64   `json:"reconciled_units"`
	Oversold         int64   `json:"oversold"`
	// Undersold is the units that stayed for sale over the last quarter of
	// a second before the buyers stopped, while buyers of their SKU were
	// told "sold out" (units available at the record, less those promised
	// to orders on their way to it); more than UndersoldBound fails the
	// sale.
	Undersold      int64 `json:"undersold"`
	UndersoldBound int64 `json:"undersold_bound"`
	// Lost is the orders told yes whose hand-off to the record never
	// ended (recorded, expired, refused or dead-lettered); Leaked the units
	// still held at either tier once the flow came to rest.
	Lost       int64   `json:"lost_sales"`
	Leaked     int64   `json:"leaked"`
	Drift      int64   `json:"drift"`
	Accounting bool    `json:"accounting_exact"`
	Seconds    float64 `json:"seconds"`
	// AttemptsPerS is every purchase attempt (admitted or turned away) per
	// second of the run; OrdersPerS is the orders placed (holds taken) per
	// second.
	AttemptsPerS float64 `json:"attempts_per_s"`
	OrdersPerS   float64 `json:"orders_per_s"`
	// P50ms and P99ms are the latencies of the attempts the rate limiter
	// let through (the stock path, admitted or refused).
	P50ms       float64      `json:"p50_ms"`
	P99ms       float64      `json:"p99_ms"`
	Chaos       *chaosReport `json:"chaos,omitempty"`
	Corrections []string     `json:"corrections,omitempty"`
	Problems    []string     `json:"problems,omitempty"`
}

// chaosReport tells what -chaos did and what the breaker made of it.
type chaosReport struct {
	RedisDownS float64 `json:"redis_down_s"`
	// DegradedPerS is the orders the database took directly per second
	// Redis was down: with a -fallback-rate above what the database can
	// take, its throughput on the degraded path (compare -max-group 1).
	DegradedPerS   float64  `json:"degraded_per_s"`
	BreakerTrips   int64    `json:"breaker_trips"`
	States         []string `json:"breaker_states"`
	Recalibrations int64    `json:"recalibrations"`
	Recalibrated   int64    `json:"recalibrated_units"`
}

// ok reports whether the sale kept its promises.
func (r *report) ok() bool {
	return r.Oversold == 0 && r.Undersold <= r.UndersoldBound && r.Lost == 0 && r.Leaked == 0 && r.Drift == 0 && r.Accounting
}

// fill sets the latency and rate figures from the recorded attempts.
func (r *report) fill(st *stats, elapsed time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r.Rejected = make(map[reason]int64, len(reasons))
	for _, k := range reasons {
		r.Rejected[k] = st.rejected[k]
	}
	lat := slices.Clone(st.lat)
	slices.Sort(lat)
	r.P50ms, r.P99ms = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99))
	r.Seconds = round(elapsed.Seconds(), 2)
	if elapsed > 0 {
		r.AttemptsPerS = round(float64(st.attempts)/elapsed.Seconds(), 0)
		r.OrdersPerS = round(float64(st.orders.Load())/elapsed.Seconds(), 0)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}

// writeJSON prints r as one JSON object.
func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints r for a person.
func (r *report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\t\n", k, v) }
	fmt.Fprintf(tw, "flash sale on %s\t\t\n", r.Backend)
	row("units on sale", fmt.Sprintf("%d over %d SKUs", r.OnSale, r.SKUs))
	row("purchase attempts", r.Attempts)
	row("orders placed (holds)", r.Orders)
	row("sold (paid)", r.Sold)
	row("returned unpaid", r.Returned)
	row("  of which resold", r.Resold)
	row("held at the end", r.Held)
	row("available at the end", r.Available)
	for _, k := range reasons {
		row("rejected: "+string(k), r.Rejected[k])
	}
	row("late payments refused", r.LatePay)
	row("hand-offs refused by the record", r.Refused)
	row("hand-offs expired in the queue", r.Expired)
	row("queue ("+r.Queue+") deliveries ended", r.Handoffs)
	row("hand-off lag p50 (ms)", r.LagP50ms)
	row("hand-off lag p99 (ms)", r.LagP99ms)
	row("delivered past their deadline", r.ExpiredDelivered)
	row("queue redeliveries", r.Redelivered)
	row("dead letters", r.DeadLetters)
	row("degraded orders (SQL)", r.Degraded)
	if r.Chaos != nil {
		row("Redis down (s)", r.Chaos.RedisDownS)
		row("degraded orders/s while Redis was down", r.Chaos.DegradedPerS)
		row("breaker trips", r.Chaos.BreakerTrips)
		row("recalibrations", r.Chaos.Recalibrations)
		row("units corrected by recalibration", r.Chaos.Recalibrated)
	}
	row("units repaired during the sale", r.Repaired)
	row("units corrected by the final reconcile", r.Reconciled)
	row("oversold", verdict(r.Oversold))
	row("undersold (left at the end while buyers heard sold out)", bounded(r.Undersold, r.UndersoldBound))
	row("lost sales", verdict(r.Lost))
	row("leaked (held at rest)", verdict(r.Leaked))
	row("Redis-vs-database drift", verdict(r.Drift))
	row("accounting exact", r.Accounting)
	row("attempts/s (all)", r.AttemptsPerS)
	row("orders placed/s", r.OrdersPerS)
	row("latency past the limiter p50 / p99 (ms)", fmt.Sprintf("%.3f / %.3f", r.P50ms, r.P99ms))
	row("run time (s)", r.Seconds)
	if err := tw.Flush(); err != nil {
		return err
	}
	list := func(title string, lines []string) {
		if len(lines) > 0 {
			fmt.Fprintf(w, "\n%s:\n", title)
			for _, l := range lines {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
	if r.Chaos != nil {
		list("timeline", r.Chaos.States)
	}
	list("final reconcile", r.Corrections)
	list("PROBLEMS", r.Problems)
	return nil
}

func bounded(n, bound int64) string {
	if n <= bound {
		return fmt.Sprintf("%d ok (<= %d)", n, bound)
	}
	return fmt.Sprintf("%d FAIL (> %d)", n, bound)
}

func verdict(n int64) string {
	if n == 0 {
		return "0 ok"
	}
	return fmt.Sprintf("%d FAIL", n)
}
