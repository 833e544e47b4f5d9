package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes tab-separated rows as aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON prints v as one indented JSON object.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// signed writes a delta with its sign: "+5", "-5", "0".
func signed(n int64) string {
	if n > 0 {
		return "+" + itoa(n)
	}
	return itoa(n)
}

// limitText is a per-user limit as the tables show it.
func limitText(n int64) string {
	if n == 0 {
		return "none"
	}
	return itoa(n)
}

// deadlineFormat is how deadlines print: UTC, to the millisecond (the
// stores keep them in milliseconds).
const deadlineFormat = "2006-01-02T15:04:05.000Z"

func deadlineText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(deadlineFormat)
}

// leftText is the time from now to a deadline, to the second, or "due"
// once it has passed (the hold waits for a reclaimer).
func leftText(deadline, now time.Time) string {
	left := deadline.Sub(now)
	if left <= 0 {
		return "due"
	}
	return max(left.Round(time.Second), time.Second).String()
}

// plural is "1 SKU", "2 SKUs".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
