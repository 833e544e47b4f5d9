// Command bench runs every stockguard backend beside the raw operation it
// is built on, on the servers it is given, and prints one Markdown table:
// deducts per second, p50/p99 latency, failed calls, and the ratio to the
// raw baseline measured in the same run.
//
//	go run ./examples/bench -rounds 3 -redis 127.0.0.1:6379 \
//	    -mysql 'root@tcp(127.0.0.1:3306)/test?interpolateParams=true' \
//	    -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// Every case loops "deduct one unit of one hot SKU" (or, where the case
// says so, of one of 1,000 SKUs in turn) from -clients goroutines for
// -duration, with a fresh order ID per call. With -rounds n every case of
// a store runs n times, the cases interleaved round after round (every
// other round in reverse order), and the table gives the median of each
// figure. A case may also be compared with
// another of its store (the last column: grouped vs ungrouped, or vs the
// raw single UPDATE). With no server
// flags it runs on miniredis and SQLite in-process, which shows the shape of
// the table but not production figures.
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
	fmt.Fprintln(stdout, "| store | case | clients | deducts/s | p50 ms | p99 ms | failed | server µs/op | vs baseline | vs |")
	fmt.Fprintln(stdout, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
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
			base := results[g.baseline]
			for i, r := range results {
				ratio := "baseline"
				if i != g.baseline {
					ratio = fmt.Sprintf("%.2fx", r.perSec/base.perSec)
				}
				cpu := "–"
				if r.cpu > 0 {
					cpu = fmt.Sprintf("%.2f", r.cpu)
				}
				var vs []string
				if i != g.baseline && r.cpu > 0 && base.cpu > 0 {
					vs = append(vs, fmt.Sprintf("server CPU/op %.2fx, p99 %.2fx baseline's", r.cpu/base.cpu, r.p99/base.p99))
				}
				for _, name := range g.cases[i].vs {
					for j, o := range g.cases {
						if o.name == name {
							vs = append(vs, fmt.Sprintf("%.2fx %s (p99 %.2fx)", r.perSec/results[j].perSec, o.name, r.p99/results[j].p99))
						}
					}
				}
				fmt.Fprintf(stdout, "| %s | %s | %d | %.0f | %.2f | %.2f | %.1f%% | %s | %s | %s |\n",
					g.store, g.cases[i].name, n, r.perSec, r.p50, r.p99, r.failedPct, cpu, ratio, strings.Join(vs, "; "))
			}
		}
	}
	for _, m := range memory {
		fmt.Fprintf(stdout, "\n%s: %.0f bytes of Redis memory per live hold (%d holds of one SKU, distinct users; INFO memory before and after)\n",
			m.store, m.perHold, m.holds)
	}
	return 0
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt options
	clients := fs.String("clients", "8,64", "comma-separated numbers of concurrent clients")
	fs.StringVar(&opt.redis, "redis", "", `Redis address (default: in-process miniredis; "none": no Redis cases)`)
	cluster := fs.String("cluster", "", "comma-separated Redis Cluster seed addresses (default: no Cluster cases)")
	fs.StringVar(&opt.mysql, "mysql", "", `MySQL/MariaDB DSN ("none", without -postgres: no SQL cases)`)
	fs.StringVar(&opt.postgres, "postgres", "", "PostgreSQL DSN (pgx)")
	fs.DurationVar(&opt.duration, "duration", 3*time.Second, "how long each case runs")
	fs.IntVar(&opt.rounds, "rounds", 1, "interleaved rounds per case; the table gives the medians")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bench [flags]\n\nMeasures every backend beside its raw Redis or SQL baseline, one hot SKU,\nand prints one Markdown table (deducts/s, p50, p99, failures, ratio to the\nbaseline measured in the same run). Without -redis, -mysql or -postgres it\nmeasures the embedded defaults (miniredis, SQLite).\n\nflags:")
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

// A benchCase deducts one unit per call; seq is unique per call.
type benchCase struct {
	name string
	vs   []string                        // names of cases of the same store to compare with
	prep func(ctx context.Context) error // fresh stock before each run
	op   func(ctx context.Context, seq int64) error
	// cpu, if set, reads the server's CPU time so far (µs, every server
	// of the store summed); the table gives its growth per deduct.
	cpu func(ctx context.Context) (float64, error)
}

type result struct {
	perSec, p50, p99, failedPct float64
	cpu                         float64 // server µs per deduct; 0: not measured
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
	return result{
		perSec:    pick(func(r result) float64 { return r.perSec }),
		p50:       pick(func(r result) float64 { return r.p50 }),
		p99:       pick(func(r result) float64 { return r.p99 }),
		failedPct: pick(func(r result) float64 { return r.failedPct }),
		cpu:       pick(func(r result) float64 { return r.cpu }),
	}
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
	var cpu0 float64
	if c.cpu != nil {
		var err error
		if cpu0, err = c.cpu(ctx); err != nil {
			return result{}, err
		}
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
	var cpu float64
	if c.cpu != nil {
		cpu1, err := c.cpu(ctx)
		if err != nil {
			return result{}, err
		}
		cpu = (cpu1 - cpu0) / float64(max(ok.Load(), 1))
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	total := ok.Load() + failed.Load()
	return result{
		perSec:    float64(ok.Load()) / d.Seconds(),
		p50:       ms(0.50),
		p99:       ms(0.99),
		failedPct: 100 * float64(failed.Load()) / float64(max(total, 1)),
		cpu:       cpu,
	}, nil
}
