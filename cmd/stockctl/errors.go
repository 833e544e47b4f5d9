package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
)

// Exit codes (the usage text's exitText documents them).
const (
	exitOK         = 0
	exitUnresolved = 1 // drift found by a dry run, or something left unresolved
	exitUsage      = 2
	exitUnknownSKU = 3
	exitInfra      = 4
)

// exitError is an error that says which exit code it means.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef is a usage error: bad flags, arguments, DSN or names.
func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// unresolvedf says the command did its work and something is left out of
// agreement: a dry run's drift, a correction left for a person.
func unresolvedf(format string, args ...any) error {
	return &exitError{code: exitUnresolved, err: fmt.Errorf(format, args...)}
}

// unknownSKUs says which SKUs neither tier knows.
func unknownSKUs(skus []string, s *session) error {
	return &exitError{code: exitUnknownSKU, err: fmt.Errorf("%w: %s (not in Redis under prefix %q, nor in table %s)",
		stock.ErrUnknownSKU, quoteList(skus), s.opts.prefix, s.record.Tables()[0])}
}

// exitCode classifies err: stockctl's own verdicts first, then the
// libraries' errors, and anything else (a refused connection, a timeout,
// an unknown outcome) is an infrastructure failure.
func exitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &e):
		return e.code
	case errors.Is(err, stock.ErrUnknownSKU):
		return exitUnknownSKU
	case errors.Is(err, stock.ErrInvalid), errors.Is(err, stock.ErrConflict):
		return exitUsage
	case errors.Is(err, reconcile.ErrUnresolved), errors.Is(err, reconcile.ErrLiveHolds):
		return exitUnresolved
	}
	return exitInfra
}

// report prints err (if any) with what to do about it, and returns the
// exit code it means.
func report(w io.Writer, cmd string, o options, err error) int {
	code := exitCode(err)
	if err == nil {
		return code
	}
	fmt.Fprintf(w, "stockctl %s: %v\n", cmd, err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(w, "the command ran out of time (--timeout %s)\n", o.timeout)
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(w, "interrupted")
	case code == exitInfra && errors.Is(err, stock.ErrUnknownOutcome):
		fmt.Fprintln(w, "the outcome is unknown: run the same command again (it is idempotent), or 'stockctl inspect' the SKU")
	case code == exitInfra && errors.Is(err, stock.ErrUnavailable):
		fmt.Fprintln(w, "the gate lost this SKU's state: 'stockctl reconcile --apply SKU' rebuilds it from the record")
	default:
		hintAbsent(w, err)
	}
	return code
}

// quoteList quotes each string and joins them with commas.
func quoteList(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", s)
	}
	return out
}
