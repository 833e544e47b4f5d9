package sqlstock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Importing sqlstock must not pull in a database driver: the application
// picks and imports its own.
func TestImportsNoDriver(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/stockguard/stockguard/stock/sqlstock").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, drv := range []string{"go-sql-driver/mysql", "jackc/pgx", "modernc.org/sqlite", "mattn/go-sqlite3", "lib/pq"} {
			if strings.Contains(pkg, drv) {
				t.Errorf("sqlstock depends on %s", pkg)
			}
		}
	}
}
