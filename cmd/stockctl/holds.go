package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

var holdsCommand = command{
	name:     "holds",
	synopsis: "holds SKU [--max N]",
	summary:  "live holds on both tiers, oldest deadline first",
	help: `Lists the SKU's live holds (order lines neither confirmed nor returned yet)
from both tiers, merged by order ID, oldest deadline first. Both tiers, since
where they differ is what an operator looks for: the record's held ledger
lines are read in one view, then the gate's holds in one atomic read.

  TIERS            both; gate only: not recorded yet (or already ended at the
                   record); record only: the gate hold ended, and the next
                   reclaim pass returns the record's copy
  GATE DEADLINE    when the gate returns the hold unless it is paid: the gate
                   decides (the SKU's Redis holds zset)
  RECORD DEADLINE  the ledger's, later by --record-grace: the backstop for a
                   copy a crash left behind
  LEFT             the time to the first deadline; "due" once it has passed
                   and no reclaimer has returned the hold yet

QTY is what the line still holds; units partial reverts gave back are shown
after it ("2 (1 returned)", as the record says, else the gate).
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		limit := fs.Int("max", 100, "show at most `N` holds, the oldest (0: all)")
		return func(args []string) (work, error) {
			if len(args) != 1 {
				return nil, errors.New("name one SKU")
			}
			if err := skuArgs(args); err != nil {
				return nil, err
			}
			if *limit < 0 {
				return nil, fmt.Errorf("--max %d: want 0 (all) or more", *limit)
			}
			return func(ctx context.Context, s *session) error { return holds(ctx, s, args[0], *limit) }, nil
		}
	},
}

// hold is one live hold, as one or both tiers have it.
type hold struct {
	Order          string     `json:"order"`
	User           string     `json:"user"`
	Qty            int64      `json:"qty"`                // still held
	Returned       int64      `json:"returned,omitempty"` // given back by partial reverts
	Tiers          string     `json:"tiers"`              // "both", "gate" or "record"
	GateDeadline   *time.Time `json:"gate_deadline,omitempty"`
	RecordDeadline *time.Time `json:"record_deadline,omitempty"`
}

// due is the deadline the hold is sorted by: the gate's, which decides,
// or the record's for a copy the gate no longer holds.
func (h hold) due() time.Time {
	if h.GateDeadline != nil {
		return *h.GateDeadline
	}
	return *h.RecordDeadline
}

func holds(ctx context.Context, s *session, sku string, limit int) error {
	r, err := s.read(ctx, []string{sku})
	if err != nil {
		return err
	}
	g, rec := r.gate[0], r.record[0]
	if !g.Exists && !rec.Exists && len(g.Holds) == 0 && len(g.Lost) == 0 {
		return unknownSKUs([]string{sku}, s)
	}
	all := mergeHolds(g.Holds, r.lines[sku])
	count := map[string]int{}
	for _, h := range all {
		count[h.Tiers]++
	}
	shown := all
	if limit > 0 && len(shown) > limit {
		shown = shown[:limit]
	}
	if err := s.returned(ctx, sku, shown); err != nil {
		return err
	}
	if len(g.Lost) > 0 {
		fmt.Fprintf(s.log, "note: the gate holds %s of %q whose line records are gone (quantity unknown, never returned by Redis): %s\n",
			plural(len(g.Lost), "order"), sku, strings.Join(g.Lost, ", "))
	}
	if s.opts.json {
		lost := append([]string{}, g.Lost...)
		return writeJSON(s.out, struct {
			SKU        string   `json:"sku"`
			Total      int      `json:"total"`
			Both       int      `json:"both"`
			GateOnly   int      `json:"gate_only"`
			RecordOnly int      `json:"record_only"`
			Holds      []hold   `json:"holds"`
			Lost       []string `json:"lost"`
		}{sku, len(all), count["both"], count["gate"], count["record"], shown, lost})
	}
	if len(all) == 0 {
		_, err := fmt.Fprintf(s.out, "no live holds of %s\n", sku)
		return err
	}
	now := s.clock.Now()
	t := newTable(s.out, "ORDER", "USER", "QTY", "TIERS", "GATE DEADLINE", "RECORD DEADLINE", "LEFT")
	for _, h := range shown {
		tiers := map[string]string{"both": "both", "gate": "gate only", "record": "record only"}[h.Tiers]
		user := h.User
		if user == "" {
			user = "-"
		}
		qty := itoa(h.Qty)
		if h.Returned > 0 {
			qty += " (" + itoa(h.Returned) + " returned)"
		}
		t.row(h.Order, user, qty, tiers, deadlineText(deref(h.GateDeadline)), deadlineText(deref(h.RecordDeadline)), leftText(h.due(), now))
	}
	if err := t.flush(); err != nil {
		return err
	}
	line := fmt.Sprintf("%s of %s: %d on both tiers, %d on the gate only, %d on the record only",
		plural(len(all), "live hold"), sku, count["both"], count["gate"], count["record"])
	if len(shown) < len(all) {
		line += fmt.Sprintf("; the oldest %d shown (--max)", len(shown))
	}
	_, err = fmt.Fprintln(s.out, line)
	return err
}

// returned fills in the units partial reverts gave back of each hold's
// line of sku: the record's count (one read of the shown orders), or the
// gate's for orders the record does not have.
func (s *session) returned(ctx context.Context, sku string, hs []hold) error {
	if len(hs) == 0 {
		return nil
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.Order
	}
	infos, err := s.record.Orders(ctx, ids)
	if err != nil {
		return fmt.Errorf("read the record's orders: %w", err)
	}
	var missing []int
	for i, in := range infos {
		if in.State == stock.StateUnknown {
			missing = append(missing, i)
		}
		hs[i].Returned = returnedOf(in, sku)
	}
	if len(missing) == 0 {
		return nil
	}
	ids = ids[:0]
	for _, i := range missing {
		ids = append(ids, hs[i].Order)
	}
	if infos, err = s.gate.Orders(ctx, ids); err != nil {
		return fmt.Errorf("read the gate's orders: %w", err)
	}
	for j, i := range missing {
		hs[i].Returned = returnedOf(infos[j], sku)
	}
	return nil
}

// returnedOf returns the units of sku that partial reverts gave back of
// the order.
func returnedOf(in stock.OrderInfo, sku string) int64 {
	for _, it := range in.Returned {
		if it.SKU == sku {
			return it.Qty
		}
	}
	return 0
}

// mergeHolds joins the gate's holds and the record's held lines of one SKU
// by order ID, oldest deadline first (ties by order ID).
func mergeHolds(gate []redisstock.Hold, record []sqlstock.Line) []hold {
	byOrder := map[string]*hold{}
	var out []*hold
	for _, h := range gate {
		dl := h.Deadline.UTC()
		x := &hold{Order: h.OrderID, User: h.UserID, Qty: h.Qty, Tiers: "gate", GateDeadline: &dl}
		byOrder[h.OrderID] = x
		out = append(out, x)
	}
	for _, l := range record {
		dl := l.Deadline.UTC()
		if x := byOrder[l.OrderID]; x != nil {
			x.Tiers, x.RecordDeadline = "both", &dl
			continue
		}
		x := &hold{Order: l.OrderID, User: l.UserID, Qty: l.Qty, Tiers: "record", RecordDeadline: &dl}
		byOrder[l.OrderID] = x
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b *hold) int {
		return cmp.Or(a.due().Compare(b.due()), cmp.Compare(a.Order, b.Order))
	})
	holds := make([]hold, len(out))
	for i, h := range out {
		holds[i] = *h
	}
	return holds
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
