package handofftest_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/handofftest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	handofftest.Run(t, handofftest.NewMemory(200*time.Millisecond).Harness())
}
