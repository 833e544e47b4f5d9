package stocktest

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// NewFunc builds a fresh, empty backend whose time is read from clock.
type NewFunc func(t *testing.T, clock stock.Clock) stock.Manager

// Epoch is where every suite clock starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs the whole conformance suite against backends built by newManager.
func Run(t *testing.T, newManager NewFunc) {
	t.Helper()
	// The subtests are added in the following commits.
	_ = newManager
}
