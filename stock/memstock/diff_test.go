package memstock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// gate is what the scenarios call: what both backends offer as a tiered
// gate, less stock.HoldReverter, which a tiered Manager seen as a gate (see
// tieredOn) does not offer.
type gate interface {
	stock.Manager
	stock.Reclaimer
	stock.OrderReader
	stock.PartialReverter
	stock.HoldExtender
	tiered.ListingChecker
}

// gateStore returns g as the gate of a tiered Manager (memstock's and
// redisstock's Stores are).
func gateStore(t *testing.T, g gate) tiered.GateStore {
	gs, ok := g.(tiered.GateStore)
	if !ok {
		t.Fatalf("%T is not a tiered.GateStore", g)
	}
	return gs
}

var sentinels = []error{stock.ErrSoldOut, stock.ErrLimitReached, stock.ErrUnknownSKU, stock.ErrUnknownOrder,
	stock.ErrConflict, stock.ErrHoldExpired, stock.ErrOrderClosed, stock.ErrOrderConfirmed, stock.ErrHoldTooLong,
	stock.ErrExceedsOrder, stock.ErrInvalid, stock.ErrUnknownOutcome, context.Canceled}

// class names the sentinels err matches, and the line of a *SKUError.
func class(err error) string {
	if err == nil {
		return "nil"
	}
	var out []string
	for _, s := range sentinels {
		if errors.Is(err, s) {
			out = append(out, s.Error())
		}
	}
	// Only the outcomes the contract reports per line name it.
	var se *stock.SKUError
	lineErr := errors.Is(err, stock.ErrSoldOut) || errors.Is(err, stock.ErrLimitReached) ||
		errors.Is(err, stock.ErrUnknownSKU) || errors.Is(err, stock.ErrHoldTooLong) || errors.Is(err, stock.ErrExceedsOrder)
	if lineErr && errors.As(err, &se) {
		out = append(out, "line="+se.SKU)
	}
	if len(out) == 0 {
		return "other: " + err.Error()
	}
	return strings.Join(out, "+")
}

// rec records what a scenario observes.
type rec struct {
	ctx   context.Context
	m     gate
	clock *stocktest.Clock
	lines []string
}

func (r *rec) log(format string, a ...any) { r.lines = append(r.lines, fmt.Sprintf(format, a...)) }

func (r *rec) do(what string, err error) { r.log("%s: %s", what, class(err)) }

func (r *rec) levels(sku string) {
	lv, err := r.m.Levels(r.ctx, sku)
	r.log("levels %s: avail=%d held=%d sold=%d limit=%d hold=%v max=%v err=%s", sku, lv.Available, lv.Held, lv.Sold,
		lv.PerUserLimit, lv.HoldTTL, lv.MaxHoldTTL, class(err))
}

func (r *rec) orders(ids ...string) {
	infos, err := r.m.Orders(r.ctx, ids)
	if err != nil {
		r.log("orders: %s", class(err))
		return
	}
	for _, o := range infos {
		dl := "zero"
		if !o.Deadline.IsZero() {
			dl = o.Deadline.Sub(stocktest.Epoch).String()
		}
		r.log("order %s: user=%q state=%v items=%v returned=%v deadline=%s", o.ID, o.UserID, o.State, o.Items, o.Returned, dl)
	}
}

func (r *rec) users(sku, user string) {
	n, err := r.m.UserUnits(r.ctx, sku, user)
	r.log("userunits %s/%s: %d %s", sku, user, n, class(err))
}

func (r *rec) reclaim(limit int) {
	out, err := r.m.ReclaimExpired(r.ctx, limit)
	slices.SortFunc(out, func(a, b stock.Reclaimed) int { return strings.Compare(a.OrderID+a.SKU, b.OrderID+b.SKU) })
	r.log("reclaim(%d): %v %s", limit, out, class(err))
}

func newMem(t *testing.T, c *stocktest.Clock) gate { return memstock.New(c) }

func newRedis(t *testing.T, c *stocktest.Clock) gate {
	m := miniredis.RunT(t)
	m.SetTime(stocktest.Epoch)
	cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { cl.Close() })
	s, err := redisstock.New(cl, redisstock.Config{Clock: c, Prefix: "diff"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// diff runs scenario on memstock and on redisstock over miniredis and
// fails when they observe different outcomes.
func diff(t *testing.T, scenario func(r *rec)) {
	t.Helper()
	diffWith(t, newMem, newRedis, scenario)
}

// diffWith is diff on the backends built by newA and newB.
func diffWith(t *testing.T, newA, newB func(*testing.T, *stocktest.Clock) gate, scenario func(r *rec)) {
	t.Helper()
	run := func(newGate func(*testing.T, *stocktest.Clock) gate) []string {
		c := stocktest.NewClock(stocktest.Epoch)
		r := &rec{ctx: context.Background(), m: newGate(t, c), clock: c}
		scenario(r)
		return r.lines
	}
	mem, red := run(newA), run(newB)
	compareSteps(t, "memstock:  ", mem, "redisstock:", red) // or the first and second backends given
}

// compareSteps fails the test at every step whose line differs between
// a, the steps of the backend labelled nameA, and b, those of nameB (a
// step one of them lacks is an empty line); it logs every other step.
func compareSteps(t *testing.T, nameA string, a []string, nameB string, b []string) {
	t.Helper()
	for i := range max(len(a), len(b)) {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			t.Errorf("step %d differs:\n %s %s\n %s %s", i, nameA, la, nameB, lb)
		} else {
			t.Logf("step %d: %s", i, la)
		}
	}
}

func put(r *rec, l stock.Listing) { r.do("put "+l.SKU, r.m.PutOnSale(r.ctx, l)) }

func deduct(r *rec, o stock.Order) { r.do("deduct "+o.ID, r.m.Deduct(r.ctx, o)) }

func one(id, user, sku string, n int64) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: []stock.Item{{SKU: sku, Qty: n}}}
}
