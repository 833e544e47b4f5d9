package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

var putOnSaleCommand = command{
	name:     "put-on-sale",
	synopsis: "put-on-sale SKU UNITS [--limit N] [--hold D] [--buckets N]",
	summary:  "list a SKU on both tiers, the record first",
	help: `Puts the SKU on sale through the shop's order flow (package stock/tiered):
the record first, then the gate, as a shop node does. UNITS overwrites the
available count; units held and sold are kept ('stockctl restock' adds units
instead). The gate gets the hold time as given and the record a longer one
(--record-grace), so that the gate decides when an unpaid hold ends; the
record's is capped at 720h (stock.MaxHoldTTL), and a hold that would leave
it no more than a second longer than the gate's is refused. Prints both
tiers' levels afterwards, as inspect does.

A --record-grace given (the flag or STOCKCTL_RECORD_GRACE, even 0) is
trusted. Not given, the default is checked first: a SKU on both tiers whose
hold times contradict it is refused before anything is written (exit 2,
naming --record-grace); give the shop's --record-grace. A SKU that is not
on both tiers (a new listing) shows no grace: the shop's other SKUs on
both tiers are checked for it (the first 500 of the record). After a full
flush of the gate no SKU is on both tiers and nothing can be checked:
give --record-grace.

Listing a SKU that is selling again overwrites the count its buyers take
from; running the same command twice is harmless.

--buckets splits a SKU too hot for one Redis Cluster master over N gate
states on different masters (see "Buckets" in package stock/redisstock):
set it when the SKU is first put on sale; 0 keeps the SKU's count.
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		limit := fs.Int64("limit", 0, "per-user limit: `N` units of this SKU one user may hold or have bought (0: none)")
		hold := fs.Duration("hold", 0, "hold time: how long an order may stay unpaid (0: "+stock.DefaultHoldTTL.String()+")")
		buckets := fs.Int("buckets", 0, "split the SKU over `N` gate states on a Redis Cluster's masters (0: keep its count)")
		return func(args []string) (work, error) {
			if len(args) != 2 {
				return nil, errors.New("want SKU UNITS")
			}
			if err := skuArgs(args[:1]); err != nil {
				return nil, err
			}
			units, err := unitsArg(args[1], 0)
			if err != nil {
				return nil, err
			}
			l := stock.Listing{SKU: args[0], Units: units, PerUserLimit: *limit, HoldTTL: *hold, Buckets: *buckets}
			if err := l.Validate(); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *session) error { return putOnSale(ctx, s, l) }, nil
		}
	},
}

// minGrace is the least the record must hold longer than the gate: the
// interval of a shop's reclaimer by default (stock.ReclaimerConfig).
const minGrace = time.Second

func putOnSale(ctx context.Context, s *session, l stock.Listing) error {
	// The record's hold is capped at stock.MaxHoldTTL: a hold near the cap
	// (or a short one with no --record-grace) would leave it no grace, and
	// the record would end holds the gate still counts, as
	// stockguard.Shop.PutOnSale refuses.
	if hold := l.EffectiveHoldTTL(); s.flow.RecordHold(hold)-hold <= minGrace {
		return &stock.InvalidError{Field: "--hold", Reason: fmt.Sprintf(
			"%v leaves the record %v more than the gate (at most stock.MaxHoldTTL %v), not more than a reclaimer's interval of %v: the record would end holds the gate still counts",
			hold, s.flow.RecordHold(hold)-hold, stock.MaxHoldTTL, minGrace)}
	}
	// The record's hold time is written with --record-grace: without one
	// given, the default must not contradict the SKU's tiers.
	if err := checkGrace(ctx, s, []string{l.SKU}); err != nil {
		return err
	}
	if err := s.flow.PutOnSale(ctx, l); err != nil {
		return err
	}
	r, err := s.read(ctx, []string{l.SKU})
	if err != nil {
		return err
	}
	lv := r.levels(0)
	gateHold, recordHold := l.EffectiveHoldTTL(), s.flow.RecordHold(l.EffectiveHoldTTL())
	if s.opts.json {
		return writeJSON(s.out, struct {
			Listing any         `json:"put_on_sale"`
			SKUs    []skuLevels `json:"skus"`
		}{struct {
			SKU          string `json:"sku"`
			Units        int64  `json:"units"`
			PerUserLimit int64  `json:"per_user_limit"`
			GateHoldMs   int64  `json:"gate_hold_ms"`
			RecordHoldMs int64  `json:"record_hold_ms"`
		}{l.SKU, l.Units, l.PerUserLimit, gateHold.Milliseconds(), recordHold.Milliseconds()}, []skuLevels{lv}})
	}
	fmt.Fprintf(s.out, "%s is on sale: %d units, per-user limit %s, hold %s at the gate and %s at the record\n\n",
		l.SKU, l.Units, limitText(l.PerUserLimit), gateHold, recordHold)
	return writeLevels(s.out, []skuLevels{lv})
}

var restockCommand = command{
	name:     "restock",
	synopsis: "restock SKU UNITS --op ID",
	summary:  "add units on both tiers, once per operation ID",
	help: `Adds UNITS to a SKU on sale through the shop's order flow: the record first,
then the gate, each once per operation ID. --op is required: name the
restock (for example by its delivery note) and reuse the name on every
retry. Running the command again with the same --op adds nothing more,
whatever happened the first time, so after an error (exit 4) run the same
command again; the same --op with another SKU or count is refused (exit 2).
A restock the record has and the gate not yet is completed at the gate by
the next run, or by 'stockctl reconcile --apply' within reconcile's restock
window, {window}; past it, reconcile counts it as
drift. Prints both tiers' levels afterwards.
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		op := fs.String("op", "", "operation `ID` of the restock (required; reuse it on every retry)")
		return func(args []string) (work, error) {
			if len(args) != 2 {
				return nil, errors.New("want SKU UNITS")
			}
			if err := skuArgs(args[:1]); err != nil {
				return nil, err
			}
			units, err := unitsArg(args[1], 1)
			if err != nil {
				return nil, err
			}
			if *op == "" {
				return nil, errors.New("--op is required: an operation ID makes the restock apply once, however often it runs")
			}
			r := stock.Restock{OpID: *op, SKU: args[0], Units: units}
			if err := r.Validate(); err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *session) error { return restock(ctx, s, r) }, nil
		}
	},
}

func restock(ctx context.Context, s *session, r stock.Restock) error {
	atRecord, atGate, err := s.opApplied(ctx, r)
	if err != nil {
		return err
	}
	if err := s.flow.Restock(ctx, r); err != nil {
		if errors.Is(err, stock.ErrUnknownSKU) {
			return &exitError{code: exitUnknownSKU, err: fmt.Errorf("%w: %q is not on sale in table %s: put it on sale first",
				stock.ErrUnknownSKU, r.SKU, s.record.Tables()[0])}
		}
		return err
	}
	rd, err := s.read(ctx, []string{r.SKU})
	if err != nil {
		return err
	}
	lv := rd.levels(0)
	if s.opts.json {
		return writeJSON(s.out, struct {
			Restock any         `json:"restock"`
			SKUs    []skuLevels `json:"skus"`
		}{struct {
			Op            string `json:"op"`
			SKU           string `json:"sku"`
			Units         int64  `json:"units"`
			AddedAtRecord bool   `json:"added_at_record"`
			AddedAtGate   bool   `json:"added_at_gate"`
		}{r.OpID, r.SKU, r.Units, !atRecord, !atGate}, []skuLevels{lv}})
	}
	switch {
	case !atRecord && !atGate:
		fmt.Fprintf(s.out, "restocked %s: +%d units at both tiers (operation %s)\n\n", r.SKU, r.Units, r.OpID)
	case atRecord && atGate:
		fmt.Fprintf(s.out, "operation %s was already applied to %s: nothing added\n\n", r.OpID, r.SKU)
	case atRecord:
		fmt.Fprintf(s.out, "operation %s was at the record only: +%d units at the gate now\n\n", r.OpID, r.Units)
	default:
		fmt.Fprintf(s.out, "operation %s was at the gate only: +%d units at the record now\n\n", r.OpID, r.Units)
	}
	return writeLevels(s.out, []skuLevels{lv})
}

// opApplied reads whether each tier has applied the restock's operation.
func (s *session) opApplied(ctx context.Context, r stock.Restock) (atRecord, atGate bool, err error) {
	v, err := s.record.View(ctx)
	if err != nil {
		return false, false, fmt.Errorf("read the record: %w", err)
	}
	defer v.Close()
	ops, err := v.Restocks(ctx, []string{r.SKU}, 0) // every one the table keeps
	if err != nil {
		return false, false, fmt.Errorf("read the record's restocks: %w", err)
	}
	for _, op := range ops {
		atRecord = atRecord || op.ID == r.OpID
	}
	snaps, err := s.gate.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: r.SKU, Ops: []string{r.OpID}}})
	if err != nil {
		return false, false, fmt.Errorf("read the gate: %w", err)
	}
	atGate = len(snaps) == 1 && len(snaps[0].OpsApplied) == 1 && snaps[0].OpsApplied[0]
	return atRecord, atGate, nil
}
