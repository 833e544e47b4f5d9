// Command bench runs every stockguard backend beside the raw operation it
// is built on, on the servers it is given, and prints one Markdown table:
// deducts per second, p50/p99 latency, failed calls, the sizes of the
// batches the store reported to its Observer, the Redis server's cost per
// order, and the ratio of each to the raw baseline measured in the same run.
//
//	go run ./examples/bench -redis 127.0.0.1:6379 -mysql none \
//	    -cluster 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
//
// Every case loops "deduct one order of one unit of one hot SKU" (or,
// where the case says so, of one of 1,000 SKUs in turn, or one unit of
// each of 3 SKUs) from -clients goroutines (default 64) for -duration.
// Each order is a flash sale's: a fresh order ID and its own UserID, on
// SKUs put on sale with PerUserLimit 1 (-anonymous: no UserID and no
// limit, as a shop without per-user limits). The raw baselines take
// neither. Each case of a store runs -rounds times (default 3), the cases
// interleaved round after round (every other round in reverse order), and
// the table gives the median of each figure. On a real Redis the server
// figures are deltas of INFO over the case, divided by its orders: CPU
// (used_cpu_sys + used_cpu_user) and of it the system's (the kernel's
// work, mostly the network's, which a batch pays once per call), the
// script calls' time and count
// (commandstats of EVALSHA and its kin, the commands they run included),
// and every command. On a shared server they include the others' load. A
// case may also be compared with another of its store (the last column:
// grouped vs ungrouped, MaxBatch 1 vs batched). After the table, the Redis
// memory one live hold costs (distinct users, PerUserLimit 1), in all and
// by key (MEMORY USAGE of each of the Store's keys). With no
// server flags it runs on miniredis and SQLite in-process, which shows the
// shape of the table but not production figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	redis, mysql, postgres string
	cluster                []string
	clients                []int
	duration               time.Duration
	rounds                 int
	// anonymous: orders carry no UserID and SKUs no per-user limit.
	anonymous bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	groups, memory, cleanup, err := setup(ctx, opt)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	head, delimiter := tableHead()
	fmt.Fprintln(stdout, head)
	fmt.Fprintln(stdout, delimiter)
	for _, g := range groups {
		for _, n := range opt.clients {
			rounds := make([][]result, len(g.cases))
			for r := range opt.rounds {
				for k := range g.cases {
					i := k
					if r%2 == 1 { // every other round backwards: no case always runs after the same one
						i = len(g.cases) - 1 - k
					}
					c := g.cases[i]
					fmt.Fprintf(stderr, "bench: %s / %s / %d clients / round %d\n", g.store, c.name, n, r+1)
					res, err := measure(ctx, c, n, opt.duration)
					if err != nil {
						fmt.Fprintf(stderr, "bench: %s %s: %v\n", g.store, c.name, err)
						return 1
					}
					rounds[i] = append(rounds[i], res)
				}
			}
			results := make([]result, len(g.cases))
			for i := range rounds {
				results[i] = median(rounds[i])
			}
			for i := range results {
				fmt.Fprintln(stdout, row(g, results, i, n))
			}
		}
	}
	for _, m := range memory {
		fmt.Fprintf(stdout, "\n%s\n", m)
	}
	return 0
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt options
	clients := fs.String("clients", "64", "comma-separated numbers of concurrent clients")
	fs.StringVar(&opt.redis, "redis", "", `Redis address (default: in-process miniredis; "none": no Redis cases)`)
	cluster := fs.String("cluster", "", "comma-separated Redis Cluster seed addresses (default: no Cluster cases)")
	fs.StringVar(&opt.mysql, "mysql", "", `MySQL/MariaDB DSN ("none", without -postgres: no SQL cases)`)
	fs.StringVar(&opt.postgres, "postgres", "", "PostgreSQL DSN (pgx)")
	fs.DurationVar(&opt.duration, "duration", 3*time.Second, "how long each case runs")
	fs.IntVar(&opt.rounds, "rounds", 3, "interleaved rounds per case; the table gives the medians")
	fs.BoolVar(&opt.anonymous, "anonymous", false, "orders without a UserID, SKUs without a per-user limit (default: each order its own user, PerUserLimit 1)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bench [flags]\n\nMeasures every backend beside its raw Redis or SQL baseline, one hot SKU,\nand prints one Markdown table (deducts/s, p50, p99, failures, batch sizes,\nRedis server cost per order, ratios to the baseline measured in the same\nrun). Without -redis, -mysql or -postgres it\nmeasures the embedded defaults (miniredis, SQLite).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if opt.duration < 100*time.Millisecond || opt.duration > time.Hour {
		return opt, fmt.Errorf("-duration %v is outside [100ms, 1h]", opt.duration)
	}
	if opt.rounds < 1 || opt.rounds > 99 {
		return opt, fmt.Errorf("-rounds %d is outside [1, 99]", opt.rounds)
	}
	if *cluster != "" {
		opt.cluster = strings.Split(*cluster, ",")
	}
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return opt, fmt.Errorf("-clients: %q is not a number in [1, 4096]", f)
		}
		opt.clients = append(opt.clients, n)
	}
	return opt, nil
}

// A group is one store's cases; cases[baseline] is the raw operation the
// others are compared with.
type group struct {
	store    string
	baseline int
	cases    []benchCase
}

// A benchCase deducts one order per call; seq is unique per call.
type benchCase struct {
	name string
	vs   []string                        // names of cases of the same store to compare with
	prep func(ctx context.Context) error // fresh stock before each run
	op   func(ctx context.Context, seq int64) error
	// server, if set, reads the server's counters so far (every server of
	// the store summed); the table gives their growth per order.
	server func(ctx context.Context) (serverStats, error)
	// batches, if set, counts the batches the case's store reports to its
	// Observer; it is reset before each run.
	batches *batchStats
}

// result is one run of a case, or the medians of its runs.
type result struct {
	perSec, p50, p99, failedPct float64
	// Per order, from the server's counters (measured set): CPU µs (of
	// it, the system's), the script calls' µs, script calls, commands.
	server   serverStats
	measured bool
	// From the Observer (batches set and at least one batch reported):
	// orders per batch, and the share (%) of orders in batches of each
	// of sizeBounds.
	batchMean  float64
	batchShare [len(sizeBounds)]float64
	batched    bool
}

// columns are the table's columns, in row's order: each name, and whether
// its figures are right-aligned (numbers).
var columns = []struct {
	name  string
	right bool
}{
	{"store", false}, {"case", false}, {"clients", true}, {"deducts/s", true}, {"vs baseline", true},
	{"p50 ms", true}, {"p99 ms", true}, {"p99 vs baseline", true}, {"failed", true},
	{"orders per batch: mean (% of orders in batches of " + sizeLabels + ")", false},
	{"server CPU µs/order", true}, {"of it system", true}, {"CPU vs baseline", true},
	{"script µs/order", true}, {"script vs baseline", true}, {"script calls/order", true},
	{"commands/order", true}, {"vs", false},
}

// tableHead is the table's first two lines: its header, and the delimiter
// row that aligns its columns.
func tableHead() (head, delimiter string) {
	var h, d strings.Builder
	for _, c := range columns {
		h.WriteString("| " + c.name + " ")
		if c.right {
			d.WriteString("|---:")
		} else {
			d.WriteString("|---")
		}
	}
	return h.String() + "|", d.String() + "|"
}

// row is the table's line for case i of g, with the results of every
// case of g at n clients.
func row(g group, results []result, i, n int) string {
	r, base := results[i], results[g.baseline]
	ratio := func(x, y float64) string {
		if i == g.baseline {
			return "baseline"
		}
		if y == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2fx", x/y)
	}
	dash := func(ok bool, format string, v float64) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf(format, v)
	}
	batches := "–"
	if r.batched {
		shares := make([]string, len(r.batchShare))
		for k, v := range r.batchShare {
			shares[k] = fmt.Sprintf("%.0f", v)
		}
		batches = fmt.Sprintf("%.1f (%s)", r.batchMean, strings.Join(shares, ", "))
	}
	server := r.measured && base.measured
	cpuRatio, scriptRatio := "–", "–"
	if server {
		cpuRatio, scriptRatio = ratio(r.server.cpu, base.server.cpu), ratio(r.server.scriptUsec, base.server.scriptUsec)
	}
	var vs []string
	for _, name := range g.cases[i].vs {
		for j, o := range g.cases {
			if o.name == name {
				vs = append(vs, fmt.Sprintf("%.2fx %s (p99 %.2fx)", r.perSec/results[j].perSec, o.name, r.p99/results[j].p99))
			}
		}
	}
	return fmt.Sprintf("| %s | %s | %d | %.0f | %s | %.2f | %.2f | %s | %.1f%% | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
		g.store, g.cases[i].name, n, r.perSec, ratio(r.perSec, base.perSec), r.p50, r.p99, ratio(r.p99, base.p99), r.failedPct,
		batches, dash(r.measured, "%.2f", r.server.cpu), dash(r.measured, "%.2f", r.server.sys), cpuRatio,
		dash(r.measured, "%.2f", r.server.scriptUsec), scriptRatio,
		dash(r.measured, "%.3f", r.server.scriptCalls), dash(r.measured, "%.2f", r.server.commands), strings.Join(vs, "; "))
}

// median is the median of each figure over rounds.
func median(rounds []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m := result{
		perSec:    pick(func(r result) float64 { return r.perSec }),
		p50:       pick(func(r result) float64 { return r.p50 }),
		p99:       pick(func(r result) float64 { return r.p99 }),
		failedPct: pick(func(r result) float64 { return r.failedPct }),
		server: serverStats{
			cpu:         pick(func(r result) float64 { return r.server.cpu }),
			sys:         pick(func(r result) float64 { return r.server.sys }),
			scriptUsec:  pick(func(r result) float64 { return r.server.scriptUsec }),
			scriptCalls: pick(func(r result) float64 { return r.server.scriptCalls }),
			commands:    pick(func(r result) float64 { return r.server.commands }),
		},
		measured:  rounds[0].measured,
		batchMean: pick(func(r result) float64 { return r.batchMean }),
		batched:   slices.ContainsFunc(rounds, func(r result) bool { return r.batched }),
	}
	for k := range m.batchShare {
		m.batchShare[k] = pick(func(r result) float64 { return r.batchShare[k] })
	}
	return m
}

// seq numbers every call of the process, so order IDs never repeat across
// cases and runs.
var seq atomic.Int64

// measure runs c from n goroutines for d and summarises the calls.
func measure(ctx context.Context, c benchCase, n int, d time.Duration) (result, error) {
	if err := c.prep(ctx); err != nil {
		return result{}, err
	}
	var (
		ok, failed atomic.Int64
		wg         sync.WaitGroup
		mu         sync.Mutex
		lat        []time.Duration
		fatal      error
	)
	var server0 serverStats
	if c.server != nil {
		var err error
		if server0, err = c.server(ctx); err != nil {
			return result{}, err
		}
	}
	if c.batches != nil {
		c.batches.reset()
	}
	deadline := time.Now().Add(d)
	for range n {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				err := c.op(ctx, seq.Add(1))
				mine = append(mine, time.Since(t0))
				switch {
				case err == nil:
					ok.Add(1)
				case isRefusal(err):
					failed.Add(1)
				default:
					mu.Lock()
					fatal = err
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if fatal != nil {
		return result{}, fatal
	}
	if len(lat) == 0 {
		return result{}, errors.New("no call finished")
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	total := ok.Load() + failed.Load()
	res := result{
		perSec:    float64(ok.Load()) / d.Seconds(),
		p50:       ms(0.50),
		p99:       ms(0.99),
		failedPct: 100 * float64(failed.Load()) / float64(max(total, 1)),
	}
	if c.server != nil {
		server1, err := c.server(ctx)
		if err != nil {
			return result{}, err
		}
		res.measured = true
		res.server = server1.per(server0, float64(max(ok.Load(), 1)))
	}
	if c.batches != nil {
		res.batchMean, res.batchShare, res.batched = c.batches.summary()
	}
	return res, nil
}
