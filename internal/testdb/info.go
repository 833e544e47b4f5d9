package testdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ServerCPU is the CPU time (user + system, µs) the Redis server behind c
// has used since it started (INFO cpu), for benchmarks that report the
// server's cost per operation.
func ServerCPU(ctx context.Context, c *redis.Client) (float64, error) {
	f, err := infoFields(ctx, c, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(f[k], 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += v
	}
	return total * 1e6, nil
}

// UsedMemory is the server's used_memory in bytes (INFO memory).
func UsedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	f, err := infoFields(ctx, c, "memory")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(f["used_memory"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO memory used_memory: %w", err)
	}
	return n, nil
}

// infoFields reads one INFO section as its name: value fields.
func infoFields(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	f := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = v
		}
	}
	return f, nil
}

// DropKeys deletes the keys starting with tag from the server behind c, a
// standalone Redis or one Cluster master: one UNLINK per key (a Cluster
// master refuses one UNLINK of keys on several slots), pipelined by the
// thousand. It runs to the end even when ctx is done.
func DropKeys(ctx context.Context, c *redis.Client, tag string) {
	ctx = context.WithoutCancel(ctx)
	iter := c.Scan(ctx, 0, tag+"*", 1000).Iterator()
	p := c.Pipeline()
	for iter.Next(ctx) {
		if p.Unlink(ctx, iter.Val()); p.Len() == 1000 {
			p.Exec(ctx)
		}
	}
	p.Exec(ctx)
}
