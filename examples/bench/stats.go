package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/observe"
)

// serverStats are a Redis server's counters since it started (or since
// CONFIG RESETSTAT, which the tool never sends).
type serverStats struct {
	cpu         float64 // µs of CPU, user + system (INFO cpu)
	sys         float64 // of cpu, the system's µs: the kernel's, mostly the network's
	scriptUsec  float64 // µs inside script calls, the commands they ran included (INFO commandstats)
	scriptCalls float64 // script calls: EVAL, EVALSHA, FCALL and their _RO forms
	commands    float64 // every command, those run by scripts included
}

// redisStats reads the counters of the server behind c.
func redisStats(ctx context.Context, c *redis.Client) (serverStats, error) {
	info, err := c.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return serverStats{}, err
	}
	return parseInfo(info)
}

// parseInfo reads serverStats from the text of INFO cpu and INFO
// commandstats. It fails when the CPU fields are missing or a
// commandstats line cannot be read.
func parseInfo(info string) (serverStats, error) {
	var st serverStats
	cpuFields := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return st, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			st.cpu += f * 1e6
			if k == "used_cpu_sys" {
				st.sys = f * 1e6
			}
			cpuFields++
		case strings.HasPrefix(k, "cmdstat_"):
			calls, usec, err := testdb.CommandStat(v)
			if err != nil {
				return st, fmt.Errorf("INFO commandstats %s: %w", k, err)
			}
			st.commands += calls
			if testdb.ScriptCommand(strings.TrimPrefix(k, "cmdstat_")) {
				st.scriptCalls += calls
				st.scriptUsec += usec
			}
		}
	}
	if cpuFields != 2 {
		return st, fmt.Errorf("INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return st, nil
}

// plus is the sum of a server's counters and another's (of a Cluster's
// masters).
func (a serverStats) plus(b serverStats) serverStats {
	return serverStats{cpu: a.cpu + b.cpu, sys: a.sys + b.sys, scriptUsec: a.scriptUsec + b.scriptUsec,
		scriptCalls: a.scriptCalls + b.scriptCalls, commands: a.commands + b.commands}
}

// per is what the counters grew by since earlier, per order.
func (a serverStats) per(earlier serverStats, orders float64) serverStats {
	return serverStats{cpu: (a.cpu - earlier.cpu) / orders, sys: (a.sys - earlier.sys) / orders,
		scriptUsec: (a.scriptUsec - earlier.scriptUsec) / orders, scriptCalls: (a.scriptCalls - earlier.scriptCalls) / orders,
		commands: (a.commands - earlier.commands) / orders}
}

// sizeBounds are the upper bounds of the batch size classes the table
// gives the share of orders of: 1, 2–7, 8–31, 32–63, 64 and more
// (DefaultMaxBatch is 64).
var sizeBounds = [...]int{1, 7, 31, 63, 1 << 30}

// sizeLabels names the classes of sizeBounds.
const sizeLabels = "1, 2–7, 8–31, 32–63, 64+"

// batchStats counts the batches of Deducts a store reports to its
// Observer. It is safe for concurrent use.
type batchStats struct {
	mu      sync.Mutex
	batches int64
	orders  [len(sizeBounds)]int64 // orders in batches of each class
}

// observer is an Observer that counts the store's batches of Deducts into
// b.
func (b *batchStats) observer() observe.Observer {
	return observe.Observer{Batch: func(_ context.Context, x observe.Batch) {
		if x.Op == observe.OpDeduct {
			b.add(x.Size)
		}
	}}
}

func (b *batchStats) add(size int) {
	k := 0
	for size > sizeBounds[k] {
		k++
	}
	b.mu.Lock()
	b.batches++
	b.orders[k] += int64(size)
	b.mu.Unlock()
}

func (b *batchStats) reset() {
	b.mu.Lock()
	b.batches, b.orders = 0, [len(sizeBounds)]int64{}
	b.mu.Unlock()
}

// summary is the mean number of orders per batch and the share (%) of
// orders in batches of each class; ok is false when no batch was reported.
func (b *batchStats) summary() (mean float64, share [len(sizeBounds)]float64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var orders int64
	for _, n := range b.orders {
		orders += n
	}
	if b.batches == 0 || orders == 0 {
		return 0, share, false
	}
	for k, n := range b.orders {
		share[k] = 100 * float64(n) / float64(orders)
	}
	return float64(orders) / float64(b.batches), share, true
}
