// Command scale measures what splitting one hot SKU into buckets
// (stock.Listing.Buckets, stock/redisstock on a Redis Cluster) buys, in one
// run, and prints one Markdown table per measurement:
//
//  1. Spread: -clients goroutines deduct one unit of one hot SKU for
//     -duration, a distinct user and a fresh order ID per order, with the
//     SKU in 3 buckets and in 1. Each master's share of the script calls
//     (INFO commandstats: EVAL, EVALSHA and their kin, before and
//     after) is printed. On a Cluster every Deduct also binds its order ID
//     in the order directory (a batch's binds go as one script call per
//     directory shard, on any master whatever B): the client therefore
//     also counts the script calls it sends to each master, the gate's
//     (on the SKU's bucket states) apart from the binds, and the table
//     gives the units each master's bucket states hold after the run (one
//     per order).
//     Target, on the gate's calls: with B=3 every master within 10% of a
//     third (a share in [0.30, 0.367]); with B=1 one master takes all.
//
//  2. Cost per order: Redis server CPU (INFO cpu, used_cpu_sys +
//     used_cpu_user) per order taken, summed over the masters and per
//     master, B=3 vs B=1 and their ratio (target: at most 1.2x).
//
//  3. Scaling on paper. The model: a master saturates at one core-second
//     per second, so the sale's throughput is capped by its busiest
//     master,
//
//     T = 1 / max_m(c_m),  c_m = CPU seconds master m spends per order
//     = share_m * c (c: CPU per order summed over the masters).
//
//     With N masters, B = N and an even spread, T_N = N / c_N. With -check
//     the command starts its own clusters of 1, 2 and 3 redis-server
//     processes (ports -check-port.., default 7101..7103; the servers are
//     pinned to CPU 0 and the command to CPU 1 with taskset when there
//     are two CPUs or more), runs B = N on each, and prints measured
//     orders/s beside the model's figures, each master's CPU use and the
//     client's, and the CPU the machine's other processes took meanwhile
//     (/proc/stat). On a machine with fewer cores than masters + 1 the
//     one-core-per-master prediction cannot be reached, and the table
//     says so.
//
//  4. Sold-out accuracy: -units units (default 3000) over 3 buckets;
//     every goroutine deducts until its first stock.ErrSoldOut. Every unit
//     must be taken and none left (Store.Available after all stopped).
//
// Rerun it with
//
//	go run ./examples/scale -cluster 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
//	go run ./examples/scale -cluster 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 -check
//
// Without -cluster it runs on three in-process miniredis servers posing
// as the masters of an evenly sliced cluster: it shows the shape of the
// tables, counts script calls on the client side (miniredis has no INFO
// commandstats) and measures no CPU. Every key the run writes starts with
// a per-run prefix (sgscale…) and is deleted at the end (SCAN + UNLINK on
// each master). The shared cluster's counters are global: another client
// busy on it during the run shows up in the figures.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/testdb"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	cluster   []string
	clients   int
	duration  time.Duration
	units     int64
	check     bool
	checkPort int
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opt options
	cluster := fs.String("cluster", "", "comma-separated Redis Cluster seed addresses (default: 3 in-process miniredis posing as masters)")
	fs.IntVar(&opt.clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&opt.duration, "duration", 3*time.Second, "how long each throughput run lasts")
	fs.Int64Var(&opt.units, "units", 3000, "units of the sold-out run")
	fs.BoolVar(&opt.check, "check", false, "also start clusters of 1, 2 and 3 redis-server processes and check the model")
	fs.IntVar(&opt.checkPort, "check-port", 7101, "first port of the -check clusters (3 ports, and their bus ports +10000)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scale [flags]\n\nMeasures one hot SKU split into buckets on a Redis Cluster: spread of the\nscript calls over the masters, server CPU per order, the throughput model,\nand sold-out accuracy. See the package doc.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return opt, err
	}
	if fs.NArg() > 0 {
		return opt, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if opt.clients < 1 || opt.clients > 4096 {
		return opt, fmt.Errorf("-clients %d is outside [1, 4096]", opt.clients)
	}
	if opt.duration < 100*time.Millisecond || opt.duration > time.Hour {
		return opt, fmt.Errorf("-duration %v is outside [100ms, 1h]", opt.duration)
	}
	if opt.units < 3 || opt.units > 10_000_000 {
		return opt, fmt.Errorf("-units %d is outside [3, 10000000]", opt.units)
	}
	if opt.checkPort < 1024 || opt.checkPort+2 > 55535 {
		return opt, fmt.Errorf("-check-port %d is outside [1024, 55533]", opt.checkPort)
	}
	for p := opt.checkPort; p < opt.checkPort+3; p++ {
		if p == 6379 || (p >= 7001 && p <= 7003) {
			return opt, fmt.Errorf("-check-port %d: ports %d..%d include %d, which is shared", opt.checkPort, opt.checkPort, opt.checkPort+2, p)
		}
	}
	if *cluster != "" {
		for _, a := range strings.Split(*cluster, ",") {
			if a = strings.TrimSpace(a); a == "" {
				return opt, fmt.Errorf("-cluster %q has an empty address", *cluster)
			}
			opt.cluster = append(opt.cluster, a)
		}
	}
	return opt, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opt, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "scale:", err)
		return 2
	}
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		fmt.Fprintln(stderr, "scale:", err)
		return 1
	}
	tag := "sgscale" + hex.EncodeToString(b[:])
	fmt.Fprintf(stdout, "`go run ./examples/scale %s`\n\n", strings.Join(args, " "))
	if err := measureAll(ctx, opt, tag, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "scale:", err)
		return 1
	}
	return 0
}

// measureAll runs the four measurements and prints their tables.
func measureAll(ctx context.Context, opt options, tag string, stdout, stderr io.Writer) error {
	var t *target
	var err error
	if len(opt.cluster) == 0 {
		t, err = embedded()
	} else {
		t, err = dial(ctx, opt.cluster, opt.cluster[0])
	}
	if err != nil {
		return err
	}
	defer t.close(ctx, tag)
	fmt.Fprintf(stdout, "Cluster: %s, %d masters (%s); %d clients, %v per run, MaxBatch default.\n\n",
		t.name, len(t.masters), strings.Join(t.masters, ", "), opt.clients, opt.duration)

	fmt.Fprintln(stderr, "scale: spread, B=3")
	r3, err := t.load(ctx, tag+"b3", 3, opt.clients, opt.duration)
	if err != nil {
		return fmt.Errorf("B=3: %w", err)
	}
	fmt.Fprintln(stderr, "scale: spread, B=1")
	r1, err := t.load(ctx, tag+"b1", 1, opt.clients, opt.duration)
	if err != nil {
		return fmt.Errorf("B=1: %w", err)
	}
	printSpread(stdout, t, []*loadResult{r3, r1})
	printCost(stdout, r3, r1)
	printModel(stdout, r3, r1)

	fmt.Fprintln(stderr, "scale: sold out")
	so, err := soldOut(ctx, t, tag+"so", opt.units, opt.clients)
	if err != nil {
		return fmt.Errorf("sold out: %w", err)
	}
	printSoldOut(stdout, so)

	if opt.check {
		return check(ctx, opt, tag, r3, r1, stdout, stderr)
	}
	return nil
}

// A target is a cluster the measurements run on.
type target struct {
	name    string
	rdb     *redis.ClusterClient
	masters []string // addresses, sorted by first slot
	mu      sync.Mutex
	calls   map[string]*nodeCalls // script calls sent, by node address
	closers []func()
}

// dial connects to a Redis Cluster, counting on the client side the
// script calls sent to each node.
func dial(ctx context.Context, addrs []string, name string) (*target, error) {
	t := &target{name: "Redis Cluster " + name, calls: map[string]*nodeCalls{}}
	t.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 256, NewClient: t.newClient})
	t.closers = append(t.closers, func() { t.rdb.Close() })
	shards, err := t.rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.close(ctx, "")
		return nil, fmt.Errorf("redis cluster %v: CLUSTER SHARDS: %w", addrs, err)
	}
	first := map[string]int{}
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				a := nodeAddr(net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)))
				t.masters, first[a] = append(t.masters, a), int(sh.Slots[0].Start)
			}
		}
	}
	slices.SortFunc(t.masters, func(a, b string) int { return first[a] - first[b] })
	return t, nil
}

// embedded starts three miniredis servers and a ClusterClient that sees
// them as the masters of a cluster sliced as redis-cli --cluster create
// slices it (miniredis answers for any slot; the client routes).
func embedded() (*target, error) {
	var addrs []string
	var closers []func()
	for range 3 {
		m, err := miniredis.Run()
		if err != nil {
			for _, c := range closers {
				c()
			}
			return nil, err
		}
		closers = append(closers, m.Close)
		addrs = append(addrs, m.Addr())
	}
	ranges := sliceSlots(3)
	slots := make([]redis.ClusterSlot, 3)
	for i := range slots {
		slots[i] = redis.ClusterSlot{Start: ranges[i][0], End: ranges[i][1], Nodes: []redis.ClusterNode{{Addr: addrs[i]}}}
	}
	t := &target{name: "embedded miniredis (3 nodes posing as masters; no CPU figures)", masters: addrs, calls: map[string]*nodeCalls{}, closers: closers}
	t.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 256, NewClient: t.newClient,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return slots, nil }})
	t.closers = append(t.closers, func() { t.rdb.Close() })
	return t, nil
}

// newClient is a node client that counts its script calls.
func (t *target) newClient(o *redis.Options) *redis.Client {
	c := redis.NewClient(o)
	c.AddHook(scriptCounter{t.counter(o.Addr)})
	return c
}

// counter is the script-call counter of the node at addr.
func (t *target) counter(addr string) *nodeCalls {
	addr = nodeAddr(addr)
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.calls[addr]
	if !ok {
		n = new(nodeCalls)
		t.calls[addr] = n
	}
	return n
}

// nodeAddr spells a node's address as the masters list does: go-redis
// names a loopback node ":port".
func nodeAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// sliceSlots returns the slot ranges redis-cli --cluster create gives n
// masters.
func sliceSlots(n int) [][2]int {
	per := 16384 / float64(n)
	out := make([][2]int, n)
	first, cursor := 0, 0.0
	for i := range n {
		last := int(math.Round(cursor + per - 1))
		if i == n-1 {
			last = 16383
		}
		out[i] = [2]int{first, last}
		first, cursor = last+1, cursor+per
	}
	return out
}

// close deletes the run's keys on every master (those starting with tag)
// and closes the clients and embedded servers.
func (t *target) close(ctx context.Context, tag string) {
	if tag != "" && t.rdb != nil {
		ctx = context.WithoutCancel(ctx)
		t.rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { testdb.DropKeys(ctx, c, tag); return nil })
	}
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
}

// scriptCounter counts the EVALSHA and EVAL commands a node client sends:
// those on the order directory (first key ":dir:{…}", the binds of a
// batch's orders, one call per directory shard, on the shard's master
// whatever the SKU's buckets) apart from the rest, the gate's (the SKU's
// bucket states).
type scriptCounter struct{ n *nodeCalls }

// nodeCalls are the script calls sent to one node.
type nodeCalls struct{ gate, dir atomic.Int64 }

func (scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h scriptCounter) count(cmd redis.Cmder) {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return
	}
	if args := cmd.Args(); len(args) > 3 {
		if k, _ := args[3].(string); strings.Contains(k, ":dir:{") {
			h.n.dir.Add(1)
			return
		}
	}
	h.n.gate.Add(1)
}

// nodeStat is what one master reports of itself.
type nodeStat struct {
	scripts int64   // script calls (INFO commandstats), or the client's count
	gate    int64   // the client's count of script calls on the gate
	dir     int64   // the client's count of directory binds
	cpu     float64 // µs; 0 when the server reports none
	server  bool    // scripts is the server's figure (INFO commandstats)
}

// stats reads every master's counters, by address.
func (t *target) stats(ctx context.Context) (map[string]nodeStat, error) {
	var mu sync.Mutex
	out := map[string]nodeStat{}
	err := t.rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		addr := nodeAddr(c.Options().Addr)
		st := nodeStat{}
		if calls, _, ok, err := testdb.ScriptStats(ctx, c); err == nil && ok {
			st.server, st.scripts = true, int64(calls)
		}
		n := t.counter(addr)
		st.gate, st.dir = n.gate.Load(), n.dir.Load()
		if !st.server {
			st.scripts = st.gate + st.dir
		}
		if cpu, err := testdb.ServerCPU(ctx, c); err == nil {
			st.cpu = cpu
		}
		mu.Lock()
		out[addr] = st
		mu.Unlock()
		return nil
	})
	return out, err
}

// machineBusy is the CPU time every process on the machine has used
// (/proc/stat: all but idle and iowait), in µs; 0 where there is none.
func machineBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:] {
		if n, err := strconv.ParseFloat(v, 64); err == nil && i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return busy * 1e6 / 100 // USER_HZ is 100 on Linux
}

// clientCPU is the CPU time this process has used, in µs.
func clientCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}
