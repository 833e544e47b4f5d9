package main

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// quietLogger drops go-redis's own log lines (one per failed dial while
// Redis is away); failures reach the app as errors and are counted there.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }
