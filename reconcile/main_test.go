package reconcile_test

import (
	"testing"

	"github.com/stockguard/stockguard/internal/testdb"
)

// TestMain says, after the tests, how many skipped for want of a real
// server and which variables enable them.
func TestMain(m *testing.M) { testdb.Main(m) }
