package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff/natsjs"
)

// zzCall runs f and turns a panic into an error.
func zzCall(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// Bad configuration is a clear error, never a panic (the brief; the
// project's constructors refuse a missing client with an error wrapping
// stock.ErrInvalid: handoff.NewConsumer, handoff.NewRecorder,
// redisstream.New). NewPublisher and NewSource given no JetStream client
// (a wiring mistake, e.g. a js left nil after a failed connect) panic
// with a nil pointer dereference.
func TestZZNilClientIsAnErrorNotAPanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var js jetstream.JetStream
	for name, f := range map[string]func() error{
		"NewPublisher": func() error { _, err := natsjs.NewPublisher(ctx, js, natsjs.Config{}); return err },
		"NewSource":    func() error { _, err := natsjs.NewSource(ctx, js, natsjs.Config{}); return err },
	} {
		err := zzCall(f)
		if err == nil {
			t.Errorf("%s(nil client) = nil error", name)
			continue
		}
		if len(err.Error()) > 6 && err.Error()[:6] == "panic:" {
			t.Errorf("%s(nil client) panicked: %v", name, err)
		}
	}
}
