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

// scriptCommands are the commandstats names of script calls.
var scriptCommands = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true,
}

// ScriptCommand reports whether name (a commandstats name, such as
// "evalsha") is a script call: EVAL, EVALSHA, FCALL or their _RO forms.
func ScriptCommand(name string) bool { return scriptCommands[name] }

// CommandStat reads calls and usec from one INFO commandstats value
// ("calls=3,usec=35,usec_per_call=11.67,…"). It fails when either is
// missing or not a number.
func CommandStat(v string) (calls, usec float64, err error) {
	seen := 0
	for _, kv := range strings.Split(v, ",") {
		k, x, _ := strings.Cut(kv, "=")
		if k != "calls" && k != "usec" {
			continue
		}
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "calls" {
			calls = f
		} else {
			usec = f
		}
		seen++
	}
	if seen != 2 {
		return 0, 0, fmt.Errorf("%q has no calls or usec", v)
	}
	return calls, usec, nil
}

// ScriptStats is what the server behind c reports of its script calls in
// INFO commandstats since it started (or its statistics were reset): the
// calls, and the µs inside them, the commands they ran included. ok is
// false when the server reports no commandstats at all (miniredis).
func ScriptStats(ctx context.Context, c *redis.Client) (calls, usec float64, ok bool, err error) {
	f, err := infoFields(ctx, c, "commandstats")
	if err != nil {
		return 0, 0, false, err
	}
	for k, v := range f {
		name, found := strings.CutPrefix(k, "cmdstat_")
		if !found {
			continue
		}
		ok = true
		if !ScriptCommand(name) {
			continue
		}
		n, us, err := CommandStat(v)
		if err != nil {
			return 0, 0, false, fmt.Errorf("INFO commandstats %s: %w", k, err)
		}
		calls, usec = calls+n, usec+us
	}
	return calls, usec, ok, nil
}
