package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

var warmupCommand = command{
	name:     "warmup",
	synopsis: "warmup [SKU...] [--force] [--dry-run]",
	summary:  "load the gate from the record before a sale (every SKU by default)",
	help: `Puts SKUs on sale at the gate from the record before a sale (package
reconcile's WarmUp): each SKU's per-user limit and hold time become the
record's (the gate's hold time is the record's less --record-grace, as the
shop's flow sets them), and its available units the record's, less the units
the gate holds for orders the record has not recorded. With no SKU named,
every SKU of the record.

No write is blind: a SKU the gate has no state for is created only if it
still has none, and one on sale is written only if no administrative write
came in between and, unless --force, it has no live holds at that instant.
A SKU with live holds is refused (ACTION refused, exit 1): it is selling, and
'stockctl reconcile --apply' is the repair that never races its orders;
--force writes it anyway, counting its holds. Every written SKU is read again
and reported as mismatch if it is still out of agreement. The table is
reconcile's; ACTION rebuilt means written.

A --record-grace given (the flag or STOCKCTL_RECORD_GRACE, even 0) is
trusted. Not given, the default is checked first: a SKU on both tiers
whose hold times contradict it (the gate's does not give the record's with
it) refuses the whole run before anything is written (exit 2, naming
--record-grace); give the shop's --record-grace. A named SKU that is
not on both tiers shows no grace: the shop's other SKUs on both tiers are
checked for it (the first 500 of the record). After a full flush of the
gate no SKU is on both tiers and nothing can be checked: give
--record-grace.
`,
	setup: func(fs *flag.FlagSet) func([]string) (work, error) {
		force := fs.Bool("force", false, "write SKUs that have live holds too")
		dry := fs.Bool("dry-run", false, "report what would be written, write nothing")
		return func(args []string) (work, error) {
			if err := skuArgs(args); err != nil {
				return nil, err
			}
			var skus []string // nil: every SKU of the record
			if len(args) > 0 {
				skus = dedupe(args)
			}
			return func(ctx context.Context, s *session) error { return warmup(ctx, s, skus, *force, *dry) }, nil
		}
	},
}

// warmup loads the gate from the record for skus (nil: every SKU of the
// record) and prints the report. Without a --record-grace given, SKUs
// whose hold times contradict the default are refused first (checkGrace).
func warmup(ctx context.Context, s *session, skus []string, force, dry bool) error {
	if err := checkGrace(ctx, s, skus); err != nil {
		return err
	}
	rec, err := s.reconciler(reconcile.Config{DryRun: dry})
	if err != nil {
		return err
	}
	rep, err := rec.WarmUp(ctx, skus, force)
	if perr := printReport(s, "warmup", rep, dry); perr != nil && err == nil {
		err = perr
	}
	var unknown []string
	for _, c := range rep.Corrections {
		if c.Action == reconcile.ActionFailed && errors.Is(c.Err, stock.ErrUnknownSKU) {
			unknown = append(unknown, c.SKU)
		}
	}
	left := rep.Count(reconcile.ActionFailed) + rep.Count(reconcile.ActionStale) - len(unknown)
	switch {
	case err != nil && !errors.Is(err, reconcile.ErrLiveHolds) && !errors.Is(err, reconcile.ErrUnresolved):
		return err
	case len(unknown) > 0:
		return &exitError{code: exitUnknownSKU, err: fmt.Errorf("%w: %s (not in table %s, which warmup loads the gate from)",
			stock.ErrUnknownSKU, quoteList(unknown), s.record.Tables()[0])}
	case errors.Is(err, reconcile.ErrLiveHolds):
		return unresolvedf("%w; --force writes them anyway, or 'stockctl reconcile --apply' repairs them without racing their orders", err)
	case err != nil:
		return unresolvedf("%w; 'stockctl reconcile --apply' repairs them", err)
	case left > 0:
		return unresolvedf("%s not written (see the table)", plural(left, "SKU"))
	}
	return nil
}
