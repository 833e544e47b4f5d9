package chaos_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/internal/testdb"
)

func TestMain(m *testing.M) {
	if os.Getenv(chaos.ChildEnv) != "" {
		os.Exit(chaos.ChildMain())
	}
	testdb.Main(m)
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
	// MariaDB and PostgreSQL always, skipped without their variables; a
	// few cells on SQLite when neither is set.
	dbs := []matrixDB{{name: "mariadb", needs: []testdb.Server{testdb.MySQL}}, {name: "postgres", needs: []testdb.Server{testdb.Postgres}}}
	if testdb.MySQL.Value() == "" && testdb.Postgres.Value() == "" {
		t.Logf("%s and %s are not set: a few cells on SQLite only", testdb.MySQLEnv, testdb.PostgresEnv)
		dbs = append([]matrixDB{{name: chaos.SQLite.Name}}, dbs...)
		if only == nil {
			only = []string{"control", "redis-kill", "flushall"}
		}
	}
	var results []chaos.Result
	for _, m := range dbs {
		t.Run(m.name, func(t *testing.T) {
			db := m.db(t)
			for _, c := range chaos.Cells() {
				if len(only) > 0 && !contains(only, c.Name) {
					continue
				}
				t.Run(c.Name, func(t *testing.T) {
					if c.NeedsTCP && db.Driver == "sqlite" {
						testdb.NeedAny(t, testdb.MySQL, testdb.Postgres)
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

// matrixDB is a database the matrix runs on: SQLite, or the server a
// variable names.
type matrixDB struct {
	name  string
	needs []testdb.Server // none for SQLite
}

// db returns the cells' database, or skips t when its variable is not set.
func (m matrixDB) db(t *testing.T) chaos.DB {
	t.Helper()
	testdb.Need(t, m.needs...)
	if m.name == chaos.SQLite.Name {
		return chaos.SQLite
	}
	for _, db := range chaos.DBsFromEnv() {
		if db.Name == m.name {
			return db
		}
	}
	t.Fatalf("%s is set, but chaos.DBsFromEnv has no %s", m.needs[0].Env, m.name)
	return chaos.DB{}
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
	testdb.NeedAny(t, testdb.MySQL, testdb.Postgres)
	dbs := chaos.DBsFromEnv()
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
