package systemtest

import (
	"context"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RedisHook is a go-redis hook that gives the checker the hand-offs inside
// a Redis client: install it on the clients the gate and the reconcilers
// use (client.AddHook(systemtest.RedisHook{})) and the checker can park a
// call before any of its commands, lose a reply after the server ran the
// command, make go-redis send a command twice (the retry of a command
// whose reply timed out: the server runs it twice and the caller gets the
// second reply), or let the node die before a command. Commands whose
// context the checker did not start pass through untouched, so the hook is
// harmless elsewhere. A client that batches several callers' commands into
// one (redisstock Config.MaxBatch above 1) must not be used: a parked call
// would hold up the others.
type RedisHook struct{}

var _ redis.Hook = RedisHook{}

// DialHook returns next unchanged.
func (RedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook applies the calling step's fault to one command.
func (RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c := ctlFrom(ctx)
		if c == nil {
			return next(ctx, cmd)
		}
		switch c.redisPoint(cmd.Name()) {
		case failBefore:
			err := downErr()
			cmd.SetErr(err)
			return err
		case loseReply:
			_ = next(ctx, cmd)
			err := lostErr()
			cmd.SetErr(err)
			return err
		case resend:
			_ = next(ctx, cmd)
			return next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook applies the calling step's fault to a pipeline (or a
// transaction) as a whole, as go-redis sends and retries it.
func (RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c := ctlFrom(ctx)
		if c == nil {
			return next(ctx, cmds)
		}
		name := "pipeline[" + strconv.Itoa(len(cmds)) + "]"
		switch c.redisPoint(name) {
		case failBefore:
			return setAll(cmds, downErr())
		case loseReply:
			_ = next(ctx, cmds)
			return setAll(cmds, lostErr())
		case resend:
			_ = next(ctx, cmds)
			return next(ctx, cmds)
		}
		return next(ctx, cmds)
	}
}

func setAll(cmds []redis.Cmder, err error) error {
	for _, c := range cmds {
		c.SetErr(err)
	}
	return err
}

var _ net.Error = timeoutError{}
