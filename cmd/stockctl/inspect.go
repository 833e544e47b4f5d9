package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

var inspectCommand = command{
	name:     "inspect",
	synopsis: "inspect SKU...",
	summary:  "both tiers' levels and settings, side by side",
	help: `Reads each SKU from both tiers, the way a reconcile pass reads them: the
record first, in one consistent view, then the gate, each SKU in one atomic
read. One row per tier:

  AVAILABLE HELD SOLD  the units as that tier counts them
  HOLDS                live holds: order lines neither confirmed nor returned
  IN FLIGHT            units of live holds this tier has and the other has not:
                       on the gate, orders not recorded yet (or already ended at
                       the record); on the record, orders whose gate hold ended,
                       whose copy the next reclaim pass returns
  LIMIT                the per-user limit ("none": no limit)
  HOLD                 the hold time; the record's is longer by --record-grace,
                       and so is its maximum (", max ...": the longest an
                       order's own hold time or an extension may make a hold)

A tier that does not have the SKU shows "-". The tiers' available counts
differ by the units in flight; 'stockctl reconcile --dry-run' tells whether
they differ by more.
`,
	setup: func(*flag.FlagSet) func([]string) (work, error) {
		return func(args []string) (work, error) {
			if len(args) == 0 {
				return nil, errors.New("name at least one SKU")
			}
			if err := skuArgs(args); err != nil {
				return nil, err
			}
			skus := dedupe(args)
			return func(ctx context.Context, s *session) error { return inspect(ctx, s, skus) }, nil
		}
	},
}

// inspect prints the SKUs' levels on both tiers. A SKU neither tier has is
// unknown (exit 3); one on one tier only is left unresolved (exit 1).
func inspect(ctx context.Context, s *session, skus []string) error {
	r, err := s.read(ctx, skus)
	if err != nil {
		return err
	}
	known, unknown := []skuLevels{}, []string{}
	var oneSided []string
	for i := range skus {
		l := r.levels(i)
		switch {
		case !l.Gate.OnSale && !l.Record.OnSale:
			unknown = append(unknown, l.SKU)
			continue
		case !l.Gate.OnSale:
			oneSided = append(oneSided, fmt.Sprintf("%q is on the record only (the gate lost it or was never warmed up: 'stockctl reconcile --apply %s' rebuilds it)", l.SKU, l.SKU))
		case !l.Record.OnSale:
			oneSided = append(oneSided, fmt.Sprintf("%q is on the gate only (not in table %s: check --table)", l.SKU, s.record.Tables()[0]))
		}
		s.noteSettings(l)
		if l.Gate.LostHolds > 0 {
			fmt.Fprintf(s.log, "note: the gate has %s of %q whose line records are gone (quantity unknown): see 'stockctl holds %s'\n",
				plural(l.Gate.LostHolds, "hold"), l.SKU, l.SKU)
		}
		known = append(known, l)
	}
	if s.opts.json {
		err = writeJSON(s.out, struct {
			SKUs    []skuLevels `json:"skus"`
			Unknown []string    `json:"unknown"`
		}{known, unknown})
	} else if len(known) > 0 {
		err = writeLevels(s.out, known)
	}
	switch {
	case err != nil:
		return err
	case len(unknown) > 0:
		return unknownSKUs(unknown, s)
	case len(oneSided) > 0:
		return unresolvedf("%s", strings.Join(oneSided, "; "))
	}
	return nil
}

// noteSettings says so on stderr when a SKU's settings at the gate are not
// the ones the flow derives from the record's: a listing written to one
// tier only, or a --record-grace that is not the shop's.
func (s *session) noteSettings(l skuLevels) {
	g := s.settingsGap(l)
	if !g.limit && !g.hold {
		return
	}
	maxNote := ""
	if g.maxDiffers {
		maxNote = fmt.Sprintf(" (and max hold %s at the gate, %s from the record's)", g.gateMax, g.wantMax)
	}
	fmt.Fprintf(s.log, "note: %q has limit %s and hold %s at the gate, where the record's settings give limit %s and hold %s%s"+
		" ('stockctl warmup' sets the gate's from the record; is --record-grace the shop's?)\n",
		l.SKU, limitText(l.Gate.PerUserLimit), g.gateHold, limitText(l.Record.PerUserLimit), g.wantHold, maxNote)
}

// settingsGap is how a SKU's settings at the gate differ from the ones the
// flow derives from the record's, with the session's --record-grace.
type settingsGap struct {
	limit      bool // the per-user limits differ
	hold       bool // the hold times or maximum hold times do not map to each other
	maxDiffers bool // the maximum hold times do not
	// gateHold and gateMax are the gate's; wantHold and wantMax what a
	// warm-up would give it: the smallest settings that map to the
	// record's (the record's maximum less the same grace).
	gateHold, wantHold, gateMax, wantMax time.Duration
	recordHold                           time.Duration
}

// settingsGap compares a SKU's settings on both tiers; a SKU on one tier
// only has no gap. It is the one place stockctl decides whether the tiers'
// hold times agree with --record-grace: inspect notes a gap, and the
// commands that write the gate's settings refuse one (checkGrace).
func (s *session) settingsGap(l skuLevels) settingsGap {
	if !l.Gate.OnSale || !l.Record.OnSale {
		return settingsGap{}
	}
	hold := time.Duration(l.Gate.HoldMs) * time.Millisecond
	recHold := time.Duration(l.Record.HoldMs) * time.Millisecond
	maxHold := time.Duration(l.Gate.MaxHoldMs) * time.Millisecond
	recMax := max(time.Duration(l.Record.MaxHoldMs)*time.Millisecond, recHold) // a record that keeps none reports 0
	// The flow writes the record's settings from the gate's (tiered
	// RecordListing): they agree when the gate's give the record's, however
	// the cap at stock.MaxHoldTTL folded them (a 20-day hold and a 15-day
	// one both give a default record 30 days), and when the gate keeps
	// the smallest settings that give the record's, as package reconcile
	// compares them (gateKeeps).
	rl := s.flow.RecordListing(stock.Listing{HoldTTL: hold, MaxHoldTTL: maxHold})
	want := s.flow.GateHold(recHold)
	wantMax := want
	if recMax > recHold {
		wantMax = max(recMax-(recHold-want), want)
	}
	maxOK := maxHold == 0 || rl.EffectiveMaxHoldTTL() == recMax || gateKeeps(maxHold, wantMax, recMax)
	return settingsGap{
		limit:      l.Gate.PerUserLimit != l.Record.PerUserLimit,
		hold:       !gateKeeps(hold, want, recHold) || !maxOK,
		maxDiffers: !maxOK,
		gateHold:   hold, wantHold: want.Truncate(time.Millisecond), gateMax: maxHold, wantMax: wantMax.Truncate(time.Millisecond),
		recordHold: recHold,
	}
}

// gateKeeps reports whether a gate setting (hold time or maximum hold
// time) maps to the record's setting rec, given least, the smallest gate
// setting that maps to it (GateHold): the comparison package reconcile
// makes before it relists a gate. Both tiers keep whole milliseconds,
// each truncating what the flow gave it, so least, worked back from the
// record's truncated settings, is within a millisecond of what the gate
// keeps (a listing of 2h/7, max 4h/7, keeps max 2057142ms at the gate,
// and a default record's settings give least max 2057142.5ms); at the
// cap at stock.MaxHoldTTL every gate setting from least up maps to the
// record's.
func gateKeeps(gate, least, rec time.Duration) bool {
	least = least.Truncate(time.Millisecond)
	d := gate - least
	return (d >= -time.Millisecond && d <= time.Millisecond) || (rec == stock.MaxHoldTTL && d >= -time.Millisecond)
}

// graceBatch is how many SKUs checkGrace reads at a time, and how many
// of the shop's other SKUs it reads for a SKU on one tier only.
const graceBatch = 500

// checkGrace refuses, before a command writes hold times with the grace
// (reconcile and warmup the gate's from the record's, put-on-sale the
// record's from the gate's), SKUs on both tiers whose hold times do not
// map to each other with the default --record-grace: the command would
// rewrite hold times, with which the shop sells, from a grace that is not
// the shop's. skus nil checks every SKU of the record. A named SKU that is
// not on both tiers (a gate to rebuild, a new listing) shows no grace, so
// the shop's other SKUs are checked for it: the first graceBatch of the
// record, those of them on both tiers. After a full flush of the gate no
// SKU is on both tiers and nothing can be checked. The refusal is a usage
// error that names --record-grace; nothing is written.
//
// A grace given (the flag or STOCKCTL_RECORD_GRACE) is not checked: it is
// the operator's word for the shop's, and the tiers' hold times may
// contradict it for a reason the command is there to repair (a listing
// changed at the record alone while a breaker kept traffic off the gate).
func checkGrace(ctx context.Context, s *session, skus []string) error {
	if s.opts.graceGiven {
		return nil
	}
	var bad, lone []string
	var first settingsGap
	check := func(batch []string) error {
		r, err := s.read(ctx, batch)
		if err != nil {
			return err
		}
		for i := range batch {
			l := r.levels(i)
			if !l.Gate.OnSale || !l.Record.OnSale {
				lone = append(lone, l.SKU)
			}
			if g := s.settingsGap(l); g.hold {
				if len(bad) == 0 {
					first = g
				}
				bad = append(bad, batch[i])
			}
		}
		return nil
	}
	readPage := func(after string) ([]string, error) {
		batch, err := s.record.SKUs(ctx, after, graceBatch)
		if err != nil {
			return nil, fmt.Errorf("read the record: %w", err)
		}
		return batch, nil
	}
	via := ""
	if skus != nil {
		for b := range slices.Chunk(skus, graceBatch) {
			if err := check(b); err != nil {
				return err
			}
		}
		if len(bad) == 0 && len(lone) > 0 {
			page, err := readPage("")
			if err != nil {
				return err
			}
			others := slices.DeleteFunc(page, func(sku string) bool { return slices.Contains(skus, sku) })
			if len(others) > 0 {
				if err := check(others); err != nil {
					return err
				}
			}
			via = fmt.Sprintf(" (%q is not on both tiers, so the shop's other SKUs were checked)", lone[0])
		}
	} else {
		for after := ""; ; {
			batch, err := readPage(after)
			if err != nil {
				return err
			}
			if len(batch) == 0 {
				break
			}
			if err := check(batch); err != nil {
				return err
			}
			after = batch[len(batch)-1]
		}
	}
	if len(bad) == 0 {
		return nil
	}
	more := ""
	if len(bad) > 1 {
		more = fmt.Sprintf(" (and %s more)", plural(len(bad)-1, "SKU"))
	}
	maxNote := ""
	if first.maxDiffers {
		maxNote = fmt.Sprintf(" (and max hold %s at the gate, %s from the record's)", shortDuration(first.gateMax), shortDuration(first.wantMax))
	}
	return usagef("no --record-grace given, and the default, %s, contradicts the tiers' hold times: %q holds %s at the gate, where its record's %s gives %s with that grace%s%s%s; "+
		"give the shop's tiered.Config.RecordGrace as --record-grace (or %s), which is trusted as given, even 0 (see 'stockctl inspect %s'); nothing was written",
		graceText(s.opts.recordGrace), bad[0], shortDuration(first.gateHold), shortDuration(first.recordHold),
		shortDuration(first.wantHold), maxNote, more, via, envNames["record-grace"], bad[0])
}

// graceText shows a --record-grace: 0 is the hold time again.
func graceText(d time.Duration) string {
	if d == 0 {
		return "0 (the hold time again)"
	}
	return shortDuration(d)
}

// skuLevels is one SKU on both tiers.
type skuLevels struct {
	SKU    string     `json:"sku"`
	Gate   tierLevels `json:"gate"`
	Record tierLevels `json:"record"`
}

// tierLevels is one SKU on one tier; all zero when the tier does not have
// it (OnSale false).
type tierLevels struct {
	OnSale       bool  `json:"on_sale"`
	Available    int64 `json:"available"`
	Held         int64 `json:"held"`
	Sold         int64 `json:"sold"`
	Holds        int   `json:"holds"`
	InFlight     int64 `json:"in_flight"`
	PerUserLimit int64 `json:"per_user_limit"`
	HoldMs       int64 `json:"hold_ms"`
	MaxHoldMs    int64 `json:"max_hold_ms"`
	Version      int64 `json:"version"`
	// LostHolds are gate holds whose line record is gone.
	LostHolds int `json:"lost_holds,omitempty"`
}

// writeLevels prints two rows per SKU, the gate's and the record's.
func writeLevels(w io.Writer, ls []skuLevels) error {
	t := newTable(w, "SKU", "TIER", "AVAILABLE", "HELD", "SOLD", "HOLDS", "IN FLIGHT", "LIMIT", "HOLD")
	for _, l := range ls {
		t.row(append([]string{l.SKU, "gate"}, l.Gate.cells()...)...)
		t.row(append([]string{l.SKU, "record"}, l.Record.cells()...)...)
	}
	return t.flush()
}

func (l tierLevels) cells() []string {
	if !l.OnSale {
		return []string{"-", "-", "-", "-", "-", "-", "-"}
	}
	hold := (time.Duration(l.HoldMs) * time.Millisecond).String()
	if l.MaxHoldMs > l.HoldMs {
		hold += ", max " + (time.Duration(l.MaxHoldMs) * time.Millisecond).String()
	}
	return []string{itoa(l.Available), itoa(l.Held), itoa(l.Sold), itoa(int64(l.Holds)), itoa(l.InFlight),
		limitText(l.PerUserLimit), hold}
}

// reading is what both tiers hold for some SKUs.
type reading struct {
	skus   []string
	record []sqlstock.SKULevels
	lines  map[string][]sqlstock.Line // the record's held lines, by SKU
	gate   []redisstock.Snapshot
}

// read reads the SKUs as a reconcile pass does: the record in one
// consistent view (its rows and held lines), then the gate, each SKU in one
// atomic script. The gate takes an order before the record does, so an
// order placed between the two readings shows on the gate only: in
// flight, as it is.
func (s *session) read(ctx context.Context, skus []string) (reading, error) {
	r := reading{skus: skus, lines: map[string][]sqlstock.Line{}}
	v, err := s.record.View(ctx)
	if err != nil {
		return r, fmt.Errorf("read the record: %w", err)
	}
	defer v.Close()
	if r.record, err = v.Levels(ctx, skus); err != nil {
		return r, fmt.Errorf("read the record: %w", err)
	}
	lines, err := v.HeldLines(ctx, skus)
	if err != nil {
		return r, fmt.Errorf("read the record's holds: %w", err)
	}
	for _, l := range lines {
		r.lines[l.SKU] = append(r.lines[l.SKU], l)
	}
	reqs := make([]redisstock.SnapshotRequest, len(skus))
	for i, sku := range skus {
		reqs[i].SKU = sku
	}
	if r.gate, err = s.gate.Snapshot(ctx, reqs); err != nil {
		return r, fmt.Errorf("read the gate: %w", err)
	}
	return r, nil
}

// levels returns the i-th SKU's levels on both tiers.
func (r reading) levels(i int) skuLevels {
	sku, g, rec := r.skus[i], r.gate[i], r.record[i]
	atRecord := map[string]bool{}
	for _, l := range r.lines[sku] {
		atRecord[l.OrderID] = true
	}
	atGate := map[string]bool{}
	for _, id := range g.Lost {
		atGate[id] = true
	}
	out := skuLevels{SKU: sku}
	if g.Exists {
		out.Gate = tierLevels{OnSale: true, Available: g.Available, Held: g.Held, Sold: g.Sold, Holds: len(g.Holds),
			PerUserLimit: g.PerUserLimit, HoldMs: g.HoldTTL.Milliseconds(), MaxHoldMs: g.MaxHoldTTL.Milliseconds(),
			Version: g.Version, LostHolds: len(g.Lost)}
	}
	for _, h := range g.Holds {
		atGate[h.OrderID] = true
		if g.Exists && !atRecord[h.OrderID] {
			out.Gate.InFlight += h.Qty
		}
	}
	if rec.Exists {
		out.Record = tierLevels{OnSale: true, Available: rec.Available, Held: rec.Held, Sold: rec.Sold, Holds: len(r.lines[sku]),
			PerUserLimit: rec.PerUserLimit, HoldMs: rec.HoldTTL.Milliseconds(), MaxHoldMs: rec.MaxHoldTTL.Milliseconds(),
			Version: rec.Version}
		for _, l := range r.lines[sku] {
			if !atGate[l.OrderID] {
				out.Record.InFlight += l.Qty
			}
		}
	}
	return out
}
