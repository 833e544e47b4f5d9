package natsjs_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/handofftest"
)

var jsonUnmarshal = json.Unmarshal

// TestConformance runs the handoff adapter contract on the server the
// tests use (STOCKGUARD_NATS_URL, or the embedded one).
func TestConformance(t *testing.T) {
	t.Parallel()
	handofftest.Run(t, harness(500*time.Millisecond))
}
