// Command chaos runs stockguard's fault matrix (package internal/chaos) on
// the databases STOCKGUARD_MYSQL_DSN and STOCKGUARD_POSTGRES_DSN name and
// prints it as a Markdown table, for the README:
//
//	go run ./internal/chaos/cmd/chaos [-long] [-cells a,b] > matrix.md
//
// Progress goes to stderr. It exits 1 when a cell fails.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stockguard/stockguard/internal/chaos"
)

func main() {
	if os.Getenv(chaos.ChildEnv) != "" {
		os.Exit(chaos.ChildMain())
	}
	long := flag.Bool("long", false, "30s of sale per cell instead of 3s")
	cells := flag.String("cells", "", "comma-separated cells to run (default all)")
	flag.Parse()
	dbs := chaos.DBsFromEnv()
	if len(dbs) == 0 {
		fmt.Fprintf(os.Stderr, "chaos: set %s and/or %s\n", chaos.MySQLEnv, chaos.PostgresEnv)
		os.Exit(2)
	}
	var only []string
	if *cells != "" {
		only = strings.Split(*cells, ",")
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	rs := chaos.Matrix(dbs, only, chaos.Options{Long: *long, Logf: logf})
	if err := chaos.WriteTable(os.Stdout, rs); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	for _, r := range rs {
		if r.Err != nil || len(r.M.Failed()) > 0 {
			os.Exit(1)
		}
	}
}
