package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// zzAnswerOf is what Confirm must answer for an order Orders reports as in
// (at time now), by the contract (memstock).
func zzAnswerOf(in stock.OrderInfo, now time.Time) error {
	switch in.State {
	case stock.StateConfirmed:
		return nil
	case stock.StateHeld:
		if in.Deadline.After(now) {
			return nil
		}
		return stock.ErrHoldExpired
	case stock.StateExpired:
		return stock.ErrHoldExpired
	case stock.StateReverted, stock.StateRefunded:
		return stock.ErrOrderClosed
	}
	return stock.ErrUnknownOrder
}

func zzSame(a, b error) bool {
	if os.Getenv("ZZ_STRICT") == "" {
		// sell or not only (the class of a refusal is tested elsewhere)
		return (a == nil) == (b == nil) && errors.Is(a, stock.ErrUnknownOrder) == errors.Is(b, stock.ErrUnknownOrder)
	}
	for _, e := range []error{stock.ErrHoldExpired, stock.ErrOrderClosed, stock.ErrUnknownOrder} {
		if errors.Is(a, e) != errors.Is(b, e) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

// Random single-threaded histories of two nodes (one of them with its
// breaker open: the flow's Fallback) over one gate and one record, with
// replies lost at either tier and retried by the caller as the contract
// says, and the clock moving. Before every Confirm, Orders is read and
// Confirm must answer what Orders says (as memstock does); a Confirm's
// final answer must stay (nil stays nil until a Revert; a refusal never
// becomes a sale).
func TestZZModelConfirmAgreesWithOrders(t *testing.T) {
	seeds := 300
	if s, err := strconv.Atoi(os.Getenv("ZZ_SEEDS")); err == nil {
		seeds = s
	}
	from, _ := strconv.Atoi(os.Getenv("ZZ_FROM"))
	for seed := from; seed < from+seeds; seed++ {
		if !zzModelRun(t, uint64(seed)) && os.Getenv("ZZ_ALL") == "" {
			return
		}
	}
}

func zzModelRun(t *testing.T, seed uint64) bool {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := stocktest.NewFaulty(memstock.New(clock))
	if os.Getenv("ZZ_REAL") != "" {
		// the shipped tiers: a Redis gate (miniredis) and a SQL record
		// (SQLite)
		gate, record = zzRealTiers(t, clock)
	}
	drifts := 0
	onDrift := func(tiered.Drift) { drifts++ }
	var queue []stock.Order
	cfg1 := tiered.Config{Clock: clock, OnDrift: onDrift}
	if os.Getenv("ZZ_ASYNC") != "" {
		cfg1.Recorder = tiered.RecorderFunc(func(_ context.Context, o stock.Order) error {
			queue = append(queue, o)
			return nil
		})
	}
	m1 := tiered.New(gate, record, cfg1)
	m2 := tiered.New(gate, record, tiered.Config{Clock: clock, OnDrift: onDrift})
	fb := m2.Fallback()
	if err := m1.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 20, HoldTTL: time.Minute, MaxHoldTTL: 3 * time.Minute}); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	const orders = 4
	order := func(i int) stock.Order {
		return stock.Order{ID: fmt.Sprintf("o%d", i), UserID: "u", Items: []stock.Item{{SKU: "a", Qty: int64(i + 1)}}}
	}
	var log []string
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d: "+format+"\nhistory:\n%s", append(append([]any{seed}, args...), fmtLog(log))...)
		return false
	}
	// final Confirm answer per order, nil meaning none yet
	type fin struct {
		set bool
		err error
	}
	last := make([]fin, orders)
	fbTaken := make([]bool, orders)
	fbConfirmed := make([]bool, orders)
	lost := make([]bool, orders) // the gate lost the order
	k := 0
	// retry a call as the contract says (same arguments while the outcome
	// is unknown), with a reply lost once at a random tier and method
	retry := func(call func() error) error {
		var err error
		for range 20 {
			err = call()
			gate.SetFault(stocktest.Healthy)
			record.SetFault(stocktest.Healthy)
			if !errors.Is(err, stock.ErrUnknownOutcome) {
				return err
			}
		}
		return err
	}
	inject := func() {
		if rng.IntN(3) != 0 {
			return
		}
		tier := gate
		if rng.IntN(2) == 0 {
			tier = record
		}
		meth := []string{"Deduct", "Confirm", "Revert", "ReclaimExpired"}[rng.IntN(4)]
		skip := rng.IntN(2)
		n := 0
		tier.SetFaultFor(stocktest.LostReply, func(c stocktest.Call) bool {
			if c.Method != meth {
				return false
			}
			n++
			return n == skip+1
		})
		name := "gate"
		if tier == record {
			name = "record"
		}
		log = append(log, fmt.Sprintf("  (lose the reply of %s %s #%d)", name, meth, skip+1))
	}
	for range 40 {
		i := rng.IntN(orders)
		id := order(i).ID
		node := "m1"
		var mgr interface {
			stock.Manager
			stock.OrderReader
		} = m1
		if rng.IntN(4) == 0 {
			node, mgr = "fallback", fb
		}
		switch op := rng.IntN(13); op {
		case 11:
			if len(queue) == 0 {
				continue
			}
			j := rng.IntN(len(queue))
			o := queue[j]
			if rng.IntN(3) != 0 {
				queue = append(queue[:j], queue[j+1:]...)
			}
			inject()
			err := retry(func() error { return m1.Settle(ctx, o) })
			log = append(log, fmt.Sprintf("m1 Settle %s: %v", o.ID, err))
		case 12:
			d := clock.Now().Add(time.Duration(rng.IntN(120)) * time.Second)
			inject()
			err := retry(func() error { return m1.ExtendHold(ctx, id, d) })
			log = append(log, fmt.Sprintf("m1 ExtendHold %s to %v: %v", id, d.Format("15:04:05"), err))
		case 9, 10:
			if os.Getenv("ZZ_INTERLEAVE") == "" {
				continue
			}
			// two calls of one order, the second run inside the first,
			// just before one of the first's tier calls
			type call struct {
				name string
				run  func() error
			}
			calls := []call{
				{"Deduct", func() error { return m1.Deduct(ctx, order(i)) }},
				{"Confirm", func() error { return m1.Confirm(ctx, id) }},
				{"Revert", func() error { return m1.Revert(ctx, id) }},
				{"Reclaim", func() error { _, err := m1.ReclaimExpired(ctx, 10); return err }},
				{"fallback Confirm", func() error { return fb.Confirm(ctx, id) }},
				{"fallback Revert", func() error { return fb.Revert(ctx, id) }},
			}
			a, b := calls[rng.IntN(4)], calls[rng.IntN(len(calls))]
			if (a.name == "Deduct" || b.name == "Deduct") && (fbTaken[i] || lost[i]) && os.Getenv("ZZ_STRICT") == "" {
				continue // TestZZRetryOfAFallbackDeductPastItsDeadline
			}
			tier := gate
			tname := "gate"
			if rng.IntN(2) == 0 {
				tier, tname = record, "record"
			}
			nth := 1 + rng.IntN(3)
			seen, fired := 0, false
			var berr error
			tier.SetBefore(func(c stocktest.Call) {
				if fired {
					return
				}
				seen++
				if seen == nth {
					fired = true
					berr = b.run()
				}
			})
			aerr := a.run()
			tier.SetBefore(nil)
			if !fired {
				berr = b.run()
			}
			log = append(log, fmt.Sprintf("%s %s: %v, with %s run before its %s call #%d: %v (fired %v)", a.name, id, aerr, b.name, tname, nth, berr, fired))
			ans := map[string]error{a.name: aerr}
			if a.name == b.name {
				if a.name == "Confirm" && (aerr == nil) != (berr == nil) && !errors.Is(aerr, stock.ErrUnknownOutcome) && !errors.Is(berr, stock.ErrUnknownOutcome) {
					return fail("two Confirms of %s disagree: %v and %v", id, aerr, berr)
				}
			}
			ans[b.name] = berr
			reverted := false
			for n, e := range ans {
				if (n == "Revert" || n == "fallback Revert") && e == nil {
					reverted = true
				}
			}
			for n, e := range ans {
				if n != "Confirm" && n != "fallback Confirm" || errors.Is(e, stock.ErrUnknownOutcome) || errors.Is(e, stock.ErrUnavailable) {
					continue
				}
				if last[i].set && last[i].err != nil && e == nil {
					return fail("Confirm %s sold after an earlier Confirm answered %v", id, last[i].err)
				}
				if last[i].set && last[i].err == nil && e != nil && !reverted {
					return fail("Confirm %s answered %v after an earlier Confirm sold it (no Revert since)", id, e)
				}
				if e == nil && n == "fallback Confirm" {
					fbConfirmed[i] = true
				}
				if e == nil || errors.Is(e, stock.ErrOrderClosed) || errors.Is(e, stock.ErrHoldExpired) {
					last[i] = fin{true, e}
				}
			}
			if reverted {
				last[i] = fin{}
			}
		case 7:
			inject()
			k++
			r := stock.Return{OpID: fmt.Sprintf("r%d", k), OrderID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}
			err := retry(func() error { return m1.RevertItems(ctx, r) })
			log = append(log, fmt.Sprintf("m1 RevertItems %s %s: %v", id, r.OpID, err))
			if err == nil {
				last[i] = fin{} // may have returned the order whole
			}
			if rng.IntN(2) == 0 {
				err := retry(func() error { return m1.RevertItems(ctx, r) })
				log = append(log, fmt.Sprintf("m1 RevertItems %s %s again: %v", id, r.OpID, err))
			}
		case 8:
			if rng.IntN(4) != 0 || os.Getenv("ZZ_FLUSH") == "" {
				continue
			}
			// the gate loses its data and is rebuilt from the record
			lv, err := record.Manager.Levels(ctx, "a")
			if err != nil {
				return fail("%v", err)
			}
			g := memstock.New(clock)
			if err := g.PutOnSale(ctx, stock.Listing{SKU: "a", Units: lv.Available, HoldTTL: time.Minute}); err != nil {
				return fail("%v", err)
			}
			gate.Manager = g
			for j := range lost {
				lost[j] = true
			}
			log = append(log, fmt.Sprintf("gate flushed, rebuilt with %d", lv.Available))
		case 0, 1:
			if node == "m1" && (fbTaken[i] || lost[i]) && os.Getenv("ZZ_STRICT") == "" {
				continue // TestZZRetryOfAFallbackDeductPastItsDeadline
			}
			if node == "fallback" {
				fbTaken[i] = true
			}
			in, err := mgr.Orders(ctx, []string{id})
			if err != nil {
				return fail("Orders: %v", err)
			}
			inject()
			err = retry(func() error { return mgr.Deduct(ctx, order(i)) })
			log = append(log, fmt.Sprintf("%s Deduct %s: %v (Orders said %v)", node, id, err, in[0].State))
			known := os.Getenv("ZZ_STRICT") == "" && fbConfirmed[i]        // TestZZRepeatDeductOfASaleTheGateHoldsPastItsDeadline
			known = known || (os.Getenv("ZZ_ASYNC") != "" && node == "m1") // Pending is not final
			if !known && in[0].State != stock.StateUnknown && !errors.Is(err, stock.ErrUnknownOutcome) && !errors.Is(err, stock.ErrUnavailable) {
				want := zzAnswerOf(in[0], clock.Now())
				if (err == nil) != (want == nil) {
					return fail("repeat Deduct %s answered %v where Orders (same node) said %v (deadline %v, now %v): want %v", id, err, in[0].State, in[0].Deadline, clock.Now(), want)
				}
			}
		case 2:
			in, err := mgr.Orders(ctx, []string{id})
			if err != nil {
				return fail("Orders: %v", err)
			}
			want := zzAnswerOf(in[0], clock.Now())
			if rin, err := record.Manager.(stock.OrderReader).Orders(ctx, []string{id}); err == nil && rin[0].State == stock.StateUnknown {
				want = stock.ErrUnknownOrder // pending: confirm after Settle
			}
			inject()
			cerr := retry(func() error { return mgr.Confirm(ctx, id) })
			log = append(log, fmt.Sprintf("%s Confirm %s: %v (Orders said %v)", node, id, cerr, in[0].State))
			if errors.Is(cerr, stock.ErrUnknownOutcome) {
				continue
			}
			if !errors.Is(cerr, stock.ErrUnavailable) && !zzSame(cerr, want) {
				return fail("Confirm %s answered %v where Orders (same node) said %v (deadline %v, now %v): want %v", id, cerr, in[0].State, in[0].Deadline, clock.Now(), want)
			}
			if last[i].set && last[i].err != nil && cerr == nil {
				return fail("Confirm %s sold after an earlier Confirm answered %v", id, last[i].err)
			}
			if last[i].set && last[i].err == nil && cerr != nil {
				return fail("Confirm %s answered %v after an earlier Confirm sold it (no Revert since)", id, cerr)
			}
			if cerr == nil && node == "fallback" {
				fbConfirmed[i] = true
			}
			if cerr == nil || errors.Is(cerr, stock.ErrOrderClosed) || errors.Is(cerr, stock.ErrHoldExpired) {
				last[i] = fin{true, cerr}
			}
		case 3:
			inject()
			err := retry(func() error { return mgr.Revert(ctx, id) })
			log = append(log, fmt.Sprintf("%s Revert %s: %v", node, id, err))
			if err == nil {
				last[i] = fin{}
			}
		case 4:
			inject()
			_, err := m1.ReclaimExpired(ctx, 10)
			gate.SetFault(stocktest.Healthy)
			record.SetFault(stocktest.Healthy)
			log = append(log, fmt.Sprintf("m1 ReclaimExpired: %v", err))
		case 5, 6:
			d := time.Duration(rng.IntN(50)) * time.Second
			clock.Advance(d)
			log = append(log, fmt.Sprintf("advance %v", d))
		}
		// the record never loses or invents units
		lv, err := record.Manager.Levels(ctx, "a")
		if err != nil {
			return fail("%v", err)
		}
		if lv.Available+lv.Held+lv.Sold != 20 {
			return fail("record %d/%d/%d does not add up to 20", lv.Available, lv.Held, lv.Sold)
		}
	}
	// at rest: every hold returned, every sale kept
	for _, o := range queue {
		err := retry(func() error { return m1.Settle(ctx, o) })
		log = append(log, fmt.Sprintf("m1 Settle %s at rest: %v", o.ID, err))
	}
	clock.Advance(10 * time.Minute)
	for range 3 {
		if _, err := m1.ReclaimExpired(ctx, 100); err != nil {
			return fail("reclaim at rest: %v", err)
		}
	}
	rl, err := record.Manager.Levels(ctx, "a")
	if err != nil {
		return fail("%v", err)
	}
	gl, err := gate.Manager.Levels(ctx, "a")
	if err != nil {
		return fail("%v", err)
	}
	if rl.Held != 0 || gl.Held != 0 {
		return fail("at rest: held %d at the record, %d at the gate", rl.Held, gl.Held)
	}
	if os.Getenv("ZZ_LOG") != "" {
		for i := range orders {
			gi, _ := gate.Manager.(stock.OrderReader).Orders(ctx, []string{order(i).ID})
			ri, _ := record.Manager.(stock.OrderReader).Orders(ctx, []string{order(i).ID})
			log = append(log, fmt.Sprintf("at rest o%d: gate %v record %v", i, gi[0].State, ri[0].State))
		}
		log = append(log, fmt.Sprintf("at rest: drifts %d gate %+v record %+v", drifts, gl, rl))
	}
	if drifts == 0 && (gl.Available != rl.Available || gl.Sold != rl.Sold) {
		return fail("at rest with no drift reported: gate available/sold %d/%d, record %d/%d", gl.Available, gl.Sold, rl.Available, rl.Sold)
	}
	for i := range orders {
		in, err := m1.Orders(ctx, []string{order(i).ID})
		if err != nil {
			return fail("%v", err)
		}
		if last[i].set && last[i].err == nil && in[0].State != stock.StateConfirmed {
			return fail("o%d: a Confirm sold it, no Revert since, and at rest it is %v", i, in[0].State)
		}
		if last[i].set && last[i].err != nil && in[0].State == stock.StateConfirmed {
			return fail("o%d: Confirm refused it (%v), and at rest it is confirmed", i, last[i].err)
		}
	}
	if os.Getenv("ZZ_LOG") != "" {
		t.Logf("seed %d passed:\n%s", seed, fmtLog(log))
	}
	return true
}

func zzRealTiers(t *testing.T, clock stock.Clock) (*stocktest.Faulty, *stocktest.Faulty) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	g, err := redisstock.New(rdb, redisstock.Config{Clock: clock, Prefix: testdb.Unique("zm")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqlstock.New(testdb.SQLite(t, 2).DB, sqlstock.Config{Clock: clock, Table: testdb.Unique("zms"), Ledger: testdb.Unique("zml")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	return stocktest.NewFaulty(g), stocktest.NewFaulty(r)
}

func fmtLog(l []string) string {
	s := ""
	for _, x := range l {
		s += "  " + x + "\n"
	}
	return s
}
