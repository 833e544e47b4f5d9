package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff/natsjs"
	"github.com/stockguard/stockguard/stock"
)

// callNoPanic runs f and turns a panic into an error.
func callNoPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// Bad configuration is a clear error, never a panic: the project's
// constructors refuse a missing client with an error wrapping
// stock.ErrInvalid (handoff.NewConsumer, handoff.NewRecorder,
// redisstream.New). NewPublisher and NewSource given no JetStream client
// (a wiring mistake, e.g. a js left nil after a failed connect) do too.
func TestNilClientIsAnErrorNotAPanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var js jetstream.JetStream
	for name, f := range map[string]func() error{
		"NewPublisher": func() error { _, err := natsjs.NewPublisher(ctx, js, natsjs.Config{}); return err },
		"NewSource":    func() error { _, err := natsjs.NewSource(ctx, js, natsjs.Config{}); return err },
	} {
		err := callNoPanic(f)
		if err == nil {
			t.Errorf("%s(nil client) = nil error", name)
			continue
		}
		if strings.HasPrefix(err.Error(), "panic:") {
			t.Errorf("%s(nil client) panicked: %v", name, err)
			continue
		}
		if !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("%s(nil client) = %v; want an error matching stock.ErrInvalid", name, err)
		}
	}
}

// A Config that cannot be used is refused, as every invalid input of the
// project is, with an error matching stock.ErrInvalid; so is a Fetch of
// fewer than one message.
func TestBadConfigMatchesErrInvalid(t *testing.T) {
	js := connect(t, serverURL(t))
	ctx := ctxT(t)
	for name, cfg := range map[string]natsjs.Config{
		"negative AckWait":         {AckWait: -time.Second},
		"Stream is DeadStream":     {Stream: "SGTEST_SAME", DeadStream: "SGTEST_SAME"},
		"Subject is DeadSubject":   {Subject: "sgtest.same", DeadSubject: "sgtest.same"},
		"PollWait of a nanosecond": {PollWait: time.Nanosecond},
	} {
		if _, err := natsjs.NewPublisher(ctx, js, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("NewPublisher with %s = %v; want an error matching stock.ErrInvalid", name, err)
		}
		if _, err := natsjs.NewSource(ctx, js, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("NewSource with %s = %v; want an error matching stock.ErrInvalid", name, err)
		}
	}
	src, err := natsjs.NewSource(ctx, js, config(t, js, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Fetch(ctx, 0); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("Fetch of 0 = %v; want an error matching stock.ErrInvalid", err)
	}
}
