package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/stockguard/stockguard/reconcile"
)

// correction is one reconcile.Correction as -json prints it.
type correction struct {
	SKU        string `json:"sku"`
	Action     string `json:"action"`
	Gate       int64  `json:"gate"`
	Record     int64  `json:"record"`
	InFlight   int64  `json:"in_flight"`
	Returning  int64  `json:"returning"`
	Restocking int64  `json:"restocking"`
	Delta      int64  `json:"delta"`
	Target     int64  `json:"target"`
	Ended      int64  `json:"ended"`
	Error      string `json:"error,omitempty"`
}

// printReport prints a reconcile or warm-up pass: one row per SKU out of
// agreement (sorted by SKU: RepairAll reports them as they complete), then
// a summary line; with -json, one object.
func printReport(s *session, cmd string, rep reconcile.Report, dry bool) error {
	cs := slices.Clone(rep.Corrections)
	slices.SortStableFunc(cs, func(a, b reconcile.Correction) int { return cmp.Compare(a.SKU, b.SKU) })
	if s.opts.json {
		out := make([]correction, len(cs))
		for i, c := range cs {
			out[i] = correction{SKU: c.SKU, Action: c.Action.String(), Gate: c.Before, Record: c.Record,
				InFlight: c.InFlight, Returning: c.Returning, Restocking: c.Restocking, Delta: c.Delta, Target: c.After, Ended: c.Ended}
			if c.Err != nil {
				out[i].Error = c.Err.Error()
			}
		}
		return writeJSON(s.out, struct {
			Command     string       `json:"command"`
			DryRun      bool         `json:"dry_run"`
			Checked     int          `json:"checked"`
			InAgreement int          `json:"in_agreement"`
			Corrections []correction `json:"corrections"`
		}{cmd, dry, rep.Checked, rep.InAgreement, out})
	}
	if len(cs) > 0 {
		notes := slices.ContainsFunc(cs, func(c reconcile.Correction) bool { return c.Err != nil })
		header := []string{"SKU", "GATE", "RECORD", "IN FLIGHT", "RETURNING", "RESTOCKING", "DELTA", "ACTION"}
		if notes {
			header = append(header, "NOTE")
		}
		t := newTable(s.out, header...)
		for _, c := range cs {
			row := []string{c.SKU, itoa(c.Before), itoa(c.Record), itoa(c.InFlight), itoa(c.Returning),
				itoa(c.Restocking), signed(c.Delta), c.Action.String()}
			if notes && c.Err != nil {
				row = append(row, c.Err.Error())
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(s.out, summary(cmd, rep, dry))
	return err
}

// summaryActions are the actions a summary counts, in its order.
var summaryActions = []reconcile.Action{reconcile.ActionDryRun, reconcile.ActionCorrected, reconcile.ActionRebuilt,
	reconcile.ActionRestocked, reconcile.ActionEnded, reconcile.ActionLeft, reconcile.ActionStale, reconcile.ActionFailed,
	reconcile.ActionRefused, reconcile.ActionMismatch}

// summary is the line under a pass's table, e.g. "checked 2 SKUs: 1 in
// agreement, 1 corrected".
func summary(cmd string, rep reconcile.Report, dry bool) string {
	var parts []string
	if cmd == "reconcile" {
		parts = append(parts, fmt.Sprintf("%d in agreement", rep.InAgreement))
	}
	for _, a := range summaryActions {
		n := rep.Count(a)
		if n == 0 {
			continue
		}
		label := a.String()
		switch {
		case a == reconcile.ActionDryRun && cmd == "reconcile":
			label = "out of agreement"
		case a == reconcile.ActionDryRun:
			label = "to write"
		case a == reconcile.ActionRebuilt && cmd == "warmup":
			label = "written"
		case a == reconcile.ActionRefused:
			label = "refused (live holds)"
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, label))
	}
	line := "checked " + plural(rep.Checked, "SKU")
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if dry {
		line += " (dry run: nothing changed)"
	}
	return line
}
