package testdb

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

// skips counts the tests skipped for want of a real server, and the
// variables that would have run them.
var skips struct {
	sync.Mutex
	n    int
	envs map[string]bool
}

// CountSkip records one test skipped for want of the servers named by
// envs, for Main's report. Need and NeedAny call it; a helper that skips
// on its own reading of the variables calls it before t.Skip.
func CountSkip(envs ...string) {
	skips.Lock()
	defer skips.Unlock()
	skips.n++
	if skips.envs == nil {
		skips.envs = map[string]bool{}
	}
	for _, e := range envs {
		skips.envs[e] = true
	}
}

// Main runs a package's tests, says how many were skipped for want of a
// real server and which variables enable them, and exits with the tests'
// code. Call it from the package's TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// The line, such as
//
//	stockguard: github.com/stockguard/stockguard/stock/sqlstock: 42 tests skipped: set STOCKGUARD_MYSQL_DSN, STOCKGUARD_POSTGRES_DSN to run them
//
// is written only when a test skipped; see Report for where it goes.
func Main(m *testing.M) {
	code := m.Run()
	Report()
	os.Exit(code)
}

// SkipLine returns Main's line without its package ("42 tests skipped:
// set ... to run them"), or "" when no test skipped for want of a server.
func SkipLine() string {
	skips.Lock()
	defer skips.Unlock()
	if skips.n == 0 {
		return ""
	}
	envs := make([]string, 0, len(skips.envs))
	for e := range skips.envs {
		envs = append(envs, e)
	}
	slices.Sort(envs)
	tests := "tests"
	if skips.n == 1 {
		tests = "test"
	}
	return fmt.Sprintf("%d %s skipped: set %s to run them", skips.n, tests, strings.Join(envs, ", "))
}

// Report writes Main's line, when a test skipped for want of a server.
//
// `go test` keeps the output of a passing package to itself unless -v (or
// -json) is given, so without -v the line goes where `go test` writes:
// the go command's standard output, when it is a terminal or a pipe (a
// regular file is left alone, since a second writer at its own offset
// would overwrite the go command's lines). Elsewhere, and with -v, it is
// the test binary's own output.
func Report() {
	line := SkipLine()
	if line == "" {
		return
	}
	line = "stockguard: " + packagePath() + ": " + line + "\n"
	if !testing.Verbose() {
		if w := goStdout(); w != nil {
			_, _ = io.WriteString(w, line)
			_ = w.Close()
			return
		}
	}
	_, _ = io.WriteString(os.Stdout, line)
}

// packagePath is the import path of the package under test.
func packagePath() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return "package"
}

// goStdout opens the standard output of the go command that runs this
// test binary (Linux only), or returns nil: when the parent is not `go`,
// or its output is neither a terminal nor a pipe.
func goStdout() *os.File {
	ppid := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	path := fmt.Sprintf("/proc/%d/fd/1", ppid)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}
