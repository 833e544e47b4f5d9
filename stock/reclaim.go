package stock

import (
	"context"
	"time"
)

// ReclaimerConfig configures RunReclaimer. The zero value means defaults.
type ReclaimerConfig struct {
	// Interval is the pause between passes once no due holds are left;
	// default 1s.
	Interval time.Duration
	// BatchSize is the limit passed to each ReclaimExpired call; default 256.
	BatchSize int
	// OnReclaim, if set, is called with every non-empty batch returned.
	OnReclaim func([]Reclaimed)
	// OnError, if set, is called with every failed pass; the loop goes on
	// after Interval.
	OnError func(error)
}

// RunReclaimer returns expired holds until ctx ends, then returns ctx.Err().
// Each pass calls r.ReclaimExpired until a batch comes back smaller than
// BatchSize, so a backlog drains without waiting for the next tick. Run one
// on as many nodes as you like: backends return each hold once.
func RunReclaimer(ctx context.Context, r Reclaimer, cfg ReclaimerConfig) error {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			got, err := r.ReclaimExpired(ctx, cfg.BatchSize)
			if err != nil {
				if ctx.Err() == nil && cfg.OnError != nil {
					cfg.OnError(err)
				}
				break
			}
			if len(got) > 0 && cfg.OnReclaim != nil {
				cfg.OnReclaim(got)
			}
			if len(got) < cfg.BatchSize {
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
