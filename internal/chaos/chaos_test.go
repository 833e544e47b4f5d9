package chaos_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/chaos"
)

func TestMain(m *testing.M) {
	if os.Getenv(chaos.ChildEnv) != "" {
		os.Exit(chaos.ChildMain())
	}
	os.Exit(m.Run())
}

// TestMatrix runs every cell on each database the environment names and
// fails a cell on any non-zero invariant figure.
func TestMatrix(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	if testing.Short() {
		t.Skip("the fault matrix takes minutes; not with -short")
	}
	opts := chaos.Options{Long: os.Getenv("STOCKGUARD_CHAOS_LONG") == "1", Dir: t.TempDir(), Logf: t.Logf}
	var only []string
	if s := os.Getenv("STOCKGUARD_CHAOS_CELLS"); s != "" {
		only = strings.Split(s, ",")
	}
	dbs := chaos.DBsFromEnv()
	if len(dbs) == 0 {
		t.Logf("%s and %s are not set: a few cells on SQLite only", chaos.MySQLEnv, chaos.PostgresEnv)
		dbs = []chaos.DB{chaos.SQLite}
		if only == nil {
			only = []string{"control", "redis-kill", "flushall"}
		}
	}
	var results []chaos.Result
	for _, db := range dbs {
		t.Run(db.Name, func(t *testing.T) {
			for _, c := range chaos.Cells() {
				if len(only) > 0 && !contains(only, c.Name) {
					continue
				}
				t.Run(c.Name, func(t *testing.T) {
					if c.NeedsTCP && db.Driver == "sqlite" {
						t.Skipf("%s needs MariaDB or PostgreSQL: set %s or %s", c.Name, chaos.MySQLEnv, chaos.PostgresEnv)
					}
					o := opts
					o.DB, o.Logf = db, t.Logf
					r := chaos.RunCell(c, o)
					results = append(results, r)
					if r.Err != nil {
						t.Fatalf("could not run: %v", r.Err)
					}
					t.Log(chaos.Summary(r))
					if f := r.M.Failed(); len(f) > 0 {
						t.Errorf("%s on %s: %s", c.Name, db.Name, strings.Join(f, ", "))
					}
				})
			}
		})
	}
	var b strings.Builder
	_ = chaos.WriteTable(&b, results)
	t.Log("\n" + b.String())
	if path := os.Getenv("STOCKGUARD_CHAOS_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestMatrixCatchesPlainErrors undoes the outcome rule at the record (every
// ErrUnknownOutcome it answers becomes a plain error) and checks that the
// sql-cut cell then fails on misclassified outcomes: the matrix's own check
// works.
func TestMatrixCatchesPlainErrors(t *testing.T) {
	dbs := chaos.DBsFromEnv()
	if len(dbs) == 0 {
		t.Skipf("set %s or %s to run the fault matrix", chaos.MySQLEnv, chaos.PostgresEnv)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
	if testing.Short() {
		t.Skip("not with -short")
	}
	for _, c := range chaos.Cells() {
		if c.Name != "sql-cut" {
			continue
		}
		// A cut must hit a confirm whose re-read fails too: three runs
		// give it room.
		for run := 1; ; run++ {
			r := chaos.RunCell(c, chaos.Options{DB: dbs[0], Dir: t.TempDir(), StripUnknown: true})
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			t.Log(chaos.Summary(r))
			if r.M.Misclassified > 0 {
				return
			}
			if run == 3 {
				t.Fatalf("a record that reports applied writes as plain errors was not caught: %+v", r.M)
			}
		}
	}
}
