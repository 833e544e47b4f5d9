// Package callctx builds the context of one call made on behalf of several
// callers (a batched script call, a grouped transaction).
package callctx

import (
	"context"
	"time"
)

// Shared returns the context of a call made for every caller in ctxs (at
// least one): it carries the values of the first but not its cancellation
// (one caller leaving must not fail the others), and ends at the latest
// deadline of the callers when all of them have one.
func Shared(ctxs []context.Context) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(ctxs[0])
	var latest time.Time
	for _, c := range ctxs {
		d, ok := c.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}

// Sleep waits d, or until ctx ends; it reports whether d passed (false at
// once for a ctx that has ended).
func Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
