package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/redisstream"
)

// queueKinds are the values -queue takes; openBroker has a case for each.
var queueKinds = []string{"redis"}

// broker is the hand-off's queue as the sale uses it: where orders are
// published, the consumers that read them, and how many messages it still
// holds (published, not yet acknowledged or dead-lettered).
type broker struct {
	name   string
	pub    handoff.Publisher
	source func(consumer string) handoff.Source
	// left asks the broker how many messages it still holds.
	left func(ctx context.Context) (int64, error)
}

// openBroker opens the queue -queue names for this run; its redelivery
// timeout is redelivery. A broker added here needs only its case.
func openBroker(ctx context.Context, cfg config, sys *system, redelivery time.Duration) (*broker, error) {
	switch cfg.queue {
	case "redis":
		q, err := redisstream.New(ctx, sys.rdb, redisstream.Config{Stream: sys.prefix + ":orders", Group: "record", Redelivery: redelivery})
		if err != nil {
			return nil, fmt.Errorf("redis stream: %w", err)
		}
		return &broker{name: "redis stream", pub: q, source: q.Source, left: q.Len}, nil
	}
	return nil, fmt.Errorf("-queue %q: want one of %s", cfg.queue, strings.Join(queueKinds, ", "))
}
