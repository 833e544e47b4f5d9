package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/stockguard/stockguard/reconcile"
)

var reconcileCommand = command{
	name:     "reconcile",
	synopsis: "reconcile --dry-run|--apply [SKU...]",
	summary:  "the drift table; --apply repairs it (every SKU by default)",
	help: `Compares the gate with the record (the source of truth) for the named SKUs,
or every SKU of the record, the way package reconcile does: the gate's
available units should be the record's, less the units in flight to the
record, plus the units returning from it, less the restocks still on their
way to the gate. One row per SKU out of agreement:

  GATE        the gate's available units
  RECORD      the record's available units
  IN FLIGHT   units the gate holds for orders the record has not recorded
              (or has already ended: the pass reverts at the gate those
              the record returned; one the record sold stays in flight)
  RETURNING   units the record holds for orders the gate has already returned
  RESTOCKING  units of restocks the record applied and the gate not yet
              within the restock window, {window}:
              the pass completes them by operation ID; not drift
  DELTA       the correction the gate needs
  ACTION      what the pass did: dry-run (nothing), corrected, rebuilt (the
              gate had no state: recreated from the record), restocked,
              ended (orders the record returned, reverted at the gate
              too; nothing else needed),
              left (larger than --max-fix: for a person), stale (kept
              changing), failed (see NOTE)

--dry-run changes nothing and exits 1 when a SKU is out of agreement.
--apply makes a real pass: each correction is a delta applied only if the
SKU's fence is still the one read, so live orders are never overwritten; it
exits 1 when a SKU is left out of agreement. Run it while the shop sells.

The gate's hold times are derived from the record's with --record-grace.
Given (the flag or STOCKCTL_RECORD_GRACE, even 0), it is trusted: a SKU
whose gate hold time does not map to the record's with it (a listing
changed at the record alone) is repaired with it. Not given, the default
is checked first: either mode refuses the whole run before anything is
written (exit 2, naming --record-grace) when a SKU on both tiers has hold
times that contradict it; give the shop's --record-grace. A named SKU
that is not on both tiers shows no grace: the shop's other SKUs on both
tiers are checked for it (the first 500 of the record). After a full
flush of the gate no SKU is on both tiers and nothing can be checked:
give --record-grace.
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		dry := fs.Bool("dry-run", false, "report the drift, change nothing")
		apply := fs.Bool("apply", false, "repair the drift")
		maxFix := fs.Int64("max-fix", 1000, "largest correction, in `UNITS` either way, --apply makes without a person (-1: any)")
		return func(args []string) (work, error) {
			if *dry == *apply {
				return nil, errors.New("give one of --dry-run (report the drift) and --apply (repair it)")
			}
			if err := skuArgs(args); err != nil {
				return nil, err
			}
			skus := dedupe(args)
			cfg := reconcile.Config{DryRun: *dry, MaxAutoFix: *maxFix}
			return func(ctx context.Context, s *session) error { return reconcilePass(ctx, s, skus, cfg) }, nil
		}
	},
}

// reconcilePass runs one pass over skus (every SKU of the record when
// empty) and prints its report. Without a --record-grace given, SKUs whose
// hold times contradict the default are refused first (checkGrace): a
// pass would rewrite the gate's, and its report would count them as drift.
func reconcilePass(ctx context.Context, s *session, skus []string, cfg reconcile.Config) error {
	var check []string // nil: every SKU of the record
	if len(skus) > 0 {
		if err := knownSKUs(ctx, s, skus); err != nil {
			return err
		}
		check = skus
	}
	if err := checkGrace(ctx, s, check); err != nil {
		return err
	}
	rec, err := s.reconciler(cfg)
	if err != nil {
		return err
	}
	var rep reconcile.Report
	if len(skus) > 0 {
		rep, err = rec.Repair(ctx, skus)
	} else {
		rep, err = rec.RepairAll(ctx)
	}
	if perr := printReport(s, "reconcile", rep, cfg.DryRun); perr != nil && err == nil {
		err = perr
	}
	switch {
	case err != nil && !errors.Is(err, reconcile.ErrUnresolved):
		return err
	case err != nil:
		return unresolvedf("%w%s", err, hints(rep))
	case cfg.DryRun && len(rep.Corrections) > 0:
		them := "them"
		if len(rep.Corrections) == 1 {
			them = "it"
		}
		return unresolvedf("%s out of agreement: 'stockctl reconcile --apply' repairs %s", plural(len(rep.Corrections), "SKU"), them)
	}
	return nil
}

// hints says what to do about the SKUs a pass left out of agreement.
func hints(rep reconcile.Report) string {
	var h string
	if rep.Count(reconcile.ActionLeft) > 0 {
		h += "; corrections larger than --max-fix are left for a person (--max-fix -1 applies any)"
	}
	if rep.Count(reconcile.ActionStale) > 0 {
		h += "; stale SKUs kept changing under administrative writes: run the pass again"
	}
	if rep.Count(reconcile.ActionFailed) > 0 {
		h += "; NOTE says why each failed SKU could not be reconciled"
	}
	return h
}

// knownSKUs refuses, before a pass, SKUs neither tier has: a pass would
// count them as in agreement.
func knownSKUs(ctx context.Context, s *session, skus []string) error {
	gate, err := s.gate.Inspect(ctx, skus)
	if err != nil {
		return fmt.Errorf("read the gate: %w", err)
	}
	record, err := s.record.Snapshot(ctx, skus)
	if err != nil {
		return fmt.Errorf("read the record: %w", err)
	}
	var unknown []string
	for i, sku := range skus {
		if !gate[i].Exists && !record[i].Exists {
			unknown = append(unknown, sku)
		}
	}
	if len(unknown) > 0 {
		return unknownSKUs(unknown, s)
	}
	return nil
}
