package callctx_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/callctx"
)

func TestSharedOutlivesOneCallerAndEndsAtTheLatestDeadline(t *testing.T) {
	now := time.Now()
	a, cancelA := context.WithDeadline(context.Background(), now.Add(time.Hour))
	b, cancelB := context.WithDeadline(context.Background(), now.Add(2*time.Hour))
	defer cancelB()
	ctx, cancel := callctx.Shared([]context.Context{a, b})
	defer cancel()
	cancelA()
	if ctx.Err() != nil {
		t.Fatal("the shared context ended with one caller")
	}
	if d, ok := ctx.Deadline(); !ok || !d.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("deadline %v, %v; want the latest caller's", d, ok)
	}
	free, cancelFree := callctx.Shared([]context.Context{b, context.Background()})
	defer cancelFree()
	if _, ok := free.Deadline(); ok {
		t.Fatal("a caller without a deadline must leave the call without one")
	}
}
