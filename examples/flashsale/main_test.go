package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// small is a sale that runs in a few seconds under -race: holds expire and
// are sold again within it.
var small = []string{"-quiet", "-units", "200", "-skus", "3", "-attempts", "2000", "-users", "500",
	"-duration", "1s", "-hold", "300ms", "-workers", "16"}

func runSale(t *testing.T, extra ...string) map[string]any {
	t.Helper()
	var out, errs bytes.Buffer
	args := append(append([]string{"-json"}, small...), extra...)
	code := run(context.Background(), args, &out, &errs)
	if code != exitOK {
		t.Fatalf("run %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errs.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	return rep
}

func num(t *testing.T, rep map[string]any, key string) int64 {
	t.Helper()
	v, ok := rep[key].(float64)
	if !ok {
		t.Fatalf("report has no number %q: %v", key, rep)
	}
	return int64(v)
}

func TestSaleSellsExactlyTheStock(t *testing.T) {
	t.Parallel()
	rep := runSale(t)
	if n := num(t, rep, "oversold"); n != 0 {
		t.Errorf("oversold = %d, want 0", n)
	}
	if n := num(t, rep, "drift"); n != 0 {
		t.Errorf("drift = %d, want 0", n)
	}
	onSale, sold, held, avail := num(t, rep, "on_sale"), num(t, rep, "sold"), num(t, rep, "held"), num(t, rep, "available")
	if onSale != 200 || sold+held+avail != onSale {
		t.Errorf("sold %d + held %d + available %d != on sale %d (want 200)", sold, held, avail, onSale)
	}
	if rep["accounting_exact"] != true {
		t.Errorf("accounting_exact = %v", rep["accounting_exact"])
	}
	// It sells: no order told yes is lost, nothing is held once the flow
	// is at rest, and no more units than the bound were for sale when the
	// buyers stopped while some were told "sold out".
	if n, b := num(t, rep, "undersold"), num(t, rep, "undersold_bound"); n > b {
		t.Errorf("undersold = %d, more than %d", n, b)
	}
	if n := num(t, rep, "lost_sales"); n != 0 {
		t.Errorf("lost_sales = %d", n)
	}
	if n := num(t, rep, "leaked"); n != 0 {
		t.Errorf("leaked = %d", n)
	}
	// The tiered flow kept Redis and the database in step by itself: the
	// final reconcile pass found nothing to correct, and no order went to
	// the database directly.
	if n := num(t, rep, "reconciled_units"); n != 0 {
		t.Errorf("the final reconcile corrected %d units: %v", n, rep["corrections"])
	}
	if n := num(t, rep, "degraded_orders"); n != 0 {
		t.Errorf("degraded_orders = %d without a fault", n)
	}
	// A fifth of the buyers never pay: the reclaimer must have returned
	// their units during the sale.
	if n := num(t, rep, "returned"); n == 0 {
		t.Errorf("returned = 0: no unpaid hold came back")
	}
	rej, ok := rep["rejected"].(map[string]any)
	if !ok {
		t.Fatalf("rejected is not an object: %v", rep["rejected"])
	}
	for _, k := range []string{"sold_out", "limit", "rate_limited", "busy"} {
		if _, ok := rej[k]; !ok {
			t.Errorf("rejected has no %q", k)
		}
	}
	for _, k := range []string{"attempts_per_s", "orders_per_s", "p50_ms", "p99_ms"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report has no %q", k)
		}
	}
}

func TestBadFlagsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-units", "-5"},
		{"-unpaid", "1.5"},
		{"-no-such-flag"},
		{"-attempts", "many"},
		{"-mysql", "x", "-postgres", "y"},
		{"extra"},
		{"-fallback-rate", "0"},
	} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), args, &out, &errs); code != exitBadUsage {
			t.Errorf("run %q: exit %d, want %d", args, code, exitBadUsage)
		}
		if out.Len() != 0 {
			t.Errorf("run %q wrote to stdout: %q", args, out.String())
		}
		if errs.Len() == 0 || !strings.Contains(errs.String(), "-") {
			t.Errorf("run %q: no message on stderr", args)
		}
	}
	if code := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); code != exitOK {
		t.Errorf("-h: exit %d, want 0", code)
	}
}

// Redis stops in the middle of the sale and comes back: the breaker sends
// orders to the database, then recalibrates Redis and ramps back, and
// nothing is oversold or left out of agreement.
func TestChaosSaleDegradesAndRecovers(t *testing.T) {
	t.Parallel()
	rep := runSale(t, "-chaos", "-duration", "2s", "-hold", "1s", "-units", "1000", "-attempts", "4000", "-fallback-rate", "100")
	if n := num(t, rep, "oversold"); n != 0 {
		t.Errorf("oversold = %d, want 0", n)
	}
	if n := num(t, rep, "drift"); n != 0 {
		t.Errorf("drift = %d, want 0", n)
	}
	onSale, sold, held, avail := num(t, rep, "on_sale"), num(t, rep, "sold"), num(t, rep, "held"), num(t, rep, "available")
	if sold+held+avail != onSale || rep["accounting_exact"] != true {
		t.Errorf("sold %d + held %d + available %d != on sale %d (accounting_exact %v)", sold, held, avail, onSale, rep["accounting_exact"])
	}
	if n := num(t, rep, "degraded_orders"); n == 0 {
		t.Errorf("degraded_orders = 0: no order reached the database while Redis was down")
	}
	chaos, ok := rep["chaos"].(map[string]any)
	if !ok {
		t.Fatalf("report has no chaos object: %v", rep)
	}
	if n := num(t, chaos, "breaker_trips"); n < 1 {
		t.Errorf("breaker_trips = %d, want at least 1", n)
	}
	if n := num(t, chaos, "recalibrations"); n < 1 {
		t.Errorf("recalibrations = %d: the breaker never tried to go back to Redis", n)
	}
	t.Logf("chaos sale: %v", rep)
}

// The verdict fails a sale that undersold beyond its bound, lost a sale
// or left units held at rest, as it fails one that oversold or drifted.
func TestVerdict(t *testing.T) {
	good := report{UndersoldBound: 5, Accounting: true}
	for name, c := range map[string]struct {
		r  report
		ok bool
	}{
		"clean":            {good, true},
		"undersold within": {func() report { r := good; r.Undersold = 5; return r }(), true},
		"undersold past":   {func() report { r := good; r.Undersold = 6; return r }(), false},
		"lost":             {func() report { r := good; r.Lost = 1; return r }(), false},
		"leaked":           {func() report { r := good; r.Leaked = 1; return r }(), false},
		"oversold":         {func() report { r := good; r.Oversold = 1; return r }(), false},
		"drift":            {func() report { r := good; r.Drift = 1; return r }(), false},
		"accounting off":   {func() report { r := good; r.Accounting = false; return r }(), false},
	} {
		if got := c.r.ok(); got != c.ok {
			t.Errorf("%s: ok() = %v, want %v", name, got, c.ok)
		}
	}
}
