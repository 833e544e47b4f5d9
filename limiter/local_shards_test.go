package limiter_test

import (
	"errors"
	"testing"

	"github.com/stockguard/stockguard/limiter"
)

// NewLocal refuses a Shards above MaxShards with an error wrapping
// ErrInvalid; it does not panic on any configuration.
func TestNewLocalRefusesHugeShards(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("NewLocal with Shards and MaxKeys 1<<62 panicked: %v; want an error wrapping ErrInvalid", p)
		}
	}()
	_, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.PerSecond(1), MaxKeys: 1 << 62, Shards: 1 << 62})
	if !errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("NewLocal with Shards 1<<62 = %v; want ErrInvalid", err)
	}
}
