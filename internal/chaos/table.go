package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Matrix runs every cell (or those named in only) on each database, in
// order, and returns the results.
func Matrix(dbs []DB, only []string, opts Options) []Result {
	var out []Result
	for _, db := range dbs {
		for _, c := range Cells() {
			if (len(only) > 0 && !contains(only, c.Name)) || (c.NeedsTCP && db.Driver == "sqlite") {
				continue
			}
			o := opts
			o.DB = db
			r := RunCell(c, o)
			if o.Logf != nil {
				o.Logf("%s", Summary(r))
			}
			out = append(out, r)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Summary is one line about a result, and the first examples of what
// failed.
func Summary(r Result) string {
	if r.Err != nil {
		return fmt.Sprintf("%s/%s: could not run: %v", r.Cell, r.DB, r.Err)
	}
	m := r.M
	s := fmt.Sprintf("%s/%s: %d orders, %d yes, finals %v, unknown-not-applied %d, record refusals %d (limit %d), failed first %d (bought on a retry %d), drift %d->%d, max %.0fms, %s",
		r.Cell, r.DB, m.Attempts, m.ToldYes, m.Finals, m.UnknownNotApplied, m.RecordRefusals, m.RefusedLimit, m.FailedFirst, m.BoughtOnRetry,
		m.DriftBefore, m.DriftAfter, m.MaxMs, r.Took.Round(100*time.Millisecond))
	if f := m.Failed(); len(f) > 0 {
		s += " FAILED " + strings.Join(f, " ")
	}
	for _, n := range m.Notes {
		s += "\n    " + n
	}
	return s
}

// WriteTable writes the results as a Markdown table: one row per cell and
// database, the invariant figures first (each must be 0), then what is
// allowed and reported.
func WriteTable(w io.Writer, rs []Result) error {
	var b strings.Builder
	b.WriteString("| cell | db | orders | told yes | oversold | over limit | leaked | double | lost acks | misclassified | late | drift after | unknown, not applied | record refusals | drift before | max ms | s | result |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		if r.Err != nil {
			fmt.Fprintf(&b, "| %s | %s | not run: %s ||||||||||||||||\n", r.Cell, r.DB, strings.ReplaceAll(r.Err.Error(), "|", "/"))
			continue
		}
		m := r.M
		result := "ok"
		if f := m.Failed(); len(f) > 0 {
			result = "FAIL " + strings.Join(f, " ")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.0f | %.0f | %s |\n",
			r.Cell, r.DB, m.Attempts, m.ToldYes, m.Oversold, m.OverLimit, m.Leaked, m.Double, m.LostAcks,
			m.Misclassified, m.Late, m.DriftAfter, m.UnknownNotApplied, m.RecordRefusals, m.DriftBefore, m.MaxMs,
			r.Took.Seconds(), result)
	}
	b.WriteString("\nRerun with `go run ./internal/chaos/cmd/chaos` (`-long` for 30 s per cell) with STOCKGUARD_MYSQL_DSN and STOCKGUARD_POSTGRES_DSN set. Cells:\n\n")
	for _, c := range Cells() {
		fmt.Fprintf(&b, "- `%s`: %s\n", c.Name, c.About)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DBsFromEnv returns the databases STOCKGUARD_MYSQL_DSN and
// STOCKGUARD_POSTGRES_DSN name, in that order.
func DBsFromEnv() []DB { return envDBs(os.Getenv) }
