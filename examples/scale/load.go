package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// loadUnits is put on sale for each throughput run: nothing sells out.
const loadUnits = 100_000_000

// loadResult is one throughput run of one hot SKU in buckets buckets.
type loadResult struct {
	buckets         int
	orders, refused int64
	elapsed         time.Duration
	masters         []string
	scripts         map[string]int64   // script calls during the run, by master
	gate, dir       map[string]int64   // the client's count of gate scripts and directory binds, by master
	cpu             map[string]float64 // server CPU µs during the run, by master
	states          map[string]int     // the SKU's bucket states, by master
	held            map[string]int64   // units held in them after the run (orders + the warm-up one)
	server          bool               // scripts are the servers' own counts
	clientCPU       float64            // this process, µs
	machine         float64            // every process on the machine, µs (/proc/stat)
}

// seq numbers every order of the process.
var seq atomic.Int64

// load puts one hot SKU on sale in buckets buckets under prefix and runs
// clients goroutines deducting one unit each, a distinct user per order,
// for d.
func (t *target) load(ctx context.Context, prefix string, buckets, clients int, d time.Duration) (*loadResult, error) {
	s, err := redisstock.New(t.rdb, redisstock.Config{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: loadUnits, HoldTTL: time.Hour, Buckets: buckets}); err != nil {
		return nil, err
	}
	// One order first, so that the scripts are loaded and the bucket
	// count is read before the counters start.
	if err := s.Deduct(ctx, stock.Order{ID: prefix + "warm", UserID: "warm", Items: []stock.Item{{SKU: "hot", Qty: 1}}}); err != nil {
		return nil, err
	}
	before, err := t.stats(ctx)
	if err != nil {
		return nil, err
	}
	c0, m0 := clientCPU(), machineBusy()
	var ok, refused atomic.Int64
	var mu sync.Mutex
	var fatal error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				n := strconv.FormatInt(seq.Add(1), 10)
				err := s.Deduct(ctx, stock.Order{ID: "o" + n, UserID: "u" + n, Items: []stock.Item{{SKU: "hot", Qty: 1}}})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, stock.ErrContention):
					refused.Add(1)
				default:
					mu.Lock()
					fatal = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if fatal != nil {
		return nil, fatal
	}
	c1, m1 := clientCPU(), machineBusy()
	after, err := t.stats(ctx)
	if err != nil {
		return nil, err
	}
	r := &loadResult{buckets: buckets, orders: ok.Load(), refused: refused.Load(), elapsed: elapsed, masters: t.masters,
		scripts: map[string]int64{}, gate: map[string]int64{}, dir: map[string]int64{}, cpu: map[string]float64{}, clientCPU: c1 - c0, machine: m1 - m0, server: true}
	for _, m := range t.masters {
		r.scripts[m] = after[m].scripts - before[m].scripts
		r.gate[m] = after[m].gate - before[m].gate
		r.dir[m] = after[m].dir - before[m].dir
		r.cpu[m] = after[m].cpu - before[m].cpu
		r.server = r.server && after[m].server
	}
	r.states, r.held, err = t.states(ctx, prefix)
	return r, err
}

// states counts the gate states under prefix on each master and the
// units they hold (one per order taken: every order is of one unit).
func (t *target) states(ctx context.Context, prefix string) (map[string]int, map[string]int64, error) {
	var mu sync.Mutex
	n, held := map[string]int{}, map[string]int64{}
	err := t.rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, prefix+":{*}:state").Result()
		if err != nil {
			return err
		}
		var h int64
		for _, k := range keys {
			v, err := c.HGet(ctx, k, "held").Int64()
			if err != nil && err != redis.Nil {
				return err
			}
			h += v
		}
		mu.Lock()
		n[nodeAddr(c.Options().Addr)], held[nodeAddr(c.Options().Addr)] = len(keys), h
		mu.Unlock()
		return nil
	})
	return n, held, err
}

func (r *loadResult) totalScripts() int64 {
	var n int64
	for _, v := range r.scripts {
		n += v
	}
	return n
}

func (r *loadResult) totalCPU() float64 {
	var n float64
	for _, v := range r.cpu {
		n += v
	}
	return n
}

// cpuPerOrder is the server CPU per order, µs, summed over the masters.
func (r *loadResult) cpuPerOrder() float64 { return r.totalCPU() / float64(max(r.orders, 1)) }

// busiest is the largest CPU per order of one master, µs.
func (r *loadResult) busiest() (string, float64) {
	var addr string
	var c float64
	for _, m := range r.masters {
		if v := r.cpu[m] / float64(max(r.orders, 1)); v >= c {
			addr, c = m, v
		}
	}
	return addr, c
}

func (r *loadResult) share(m string) float64 {
	return float64(r.scripts[m]) / float64(max(r.totalScripts(), 1))
}

func sum(v map[string]int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// gateShare is master m's share of the gate's script calls.
func (r *loadResult) gateShare(m string) float64 {
	return float64(r.gate[m]) / float64(max(sum(r.gate), 1))
}

// spreadVerdict says whether r meets the target for its B.
func spreadVerdict(r *loadResult) string {
	n := len(r.masters)
	switch {
	case sum(r.gate) == 0:
		return "no script calls counted"
	case r.buckets == 1:
		for _, m := range r.masters {
			if r.gateShare(m) == 1 {
				return "PASS: one master takes all"
			}
		}
		return "FAIL: more than one master"
	case r.buckets == n:
		ideal := 1 / float64(n)
		worst := 0.0
		for _, m := range r.masters {
			worst = math.Max(worst, math.Abs(r.gateShare(m)-ideal)/ideal)
		}
		if worst <= 0.10 {
			return fmt.Sprintf("PASS: every master within %.1f%% of 1/%d", 100*worst, n)
		}
		return fmt.Sprintf("FAIL: a master %.1f%% off 1/%d", 100*worst, n)
	}
	return fmt.Sprintf("B=%d on %d masters", r.buckets, n)
}

// orderVerdict says whether the orders (units held) are spread as the
// gate calls should be.
func orderVerdict(r *loadResult) string {
	ideal := 1 / float64(r.buckets)
	worst := 0.0
	for _, m := range r.masters {
		if r.held[m] > 0 || r.buckets == len(r.masters) {
			worst = math.Max(worst, math.Abs(float64(r.held[m])/float64(max(sum(r.held), 1))-ideal)/ideal)
		}
	}
	return fmt.Sprintf("orders: worst master %.1f%% off 1/%d", 100*worst, r.buckets)
}

func printSpread(w io.Writer, t *target, rs []*loadResult) {
	src := "INFO commandstats: calls of EVAL, EVALSHA and their kin"
	if !rs[0].server {
		src = "counted by the client: the servers report no commandstats"
	}
	fmt.Fprintln(w, "### 1. Spread of the script calls over the masters")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "All script calls: %s. Each Deduct on a Cluster also runs one bind script on its order's directory\n", src)
	fmt.Fprintln(w, "entry (slot of the order ID, so spread over every master whatever B); the client tells those (dir) from the")
	fmt.Fprintln(w, "gate's calls on the SKU's bucket states (gate, batched per slot). The verdict is on the gate's share.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| B | master | bucket states | all script calls | share | gate calls (client) | gate share | dir binds (client) | units held (orders) | order share | orders/s | orders per gate call | verdict |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		for i, m := range t.masters {
			verdict, rate, per := "", "", ""
			if i == 0 {
				verdict = "gate calls: " + spreadVerdict(r) + "; " + orderVerdict(r)
				rate = fmt.Sprintf("%.0f", float64(r.orders)/r.elapsed.Seconds())
				per = fmt.Sprintf("%.2f", float64(r.orders)/float64(max(sum(r.gate), 1)))
			}
			fmt.Fprintf(w, "| %d | %s | %d | %d | %.3f | %d | %.3f | %d | %d | %.3f | %s | %s | %s |\n", r.buckets, m, r.states[m], r.scripts[m], r.share(m),
				r.gate[m], r.gateShare(m), r.dir[m], r.held[m], float64(r.held[m])/float64(max(sum(r.held), 1)), rate, per, verdict)
		}
	}
	fmt.Fprintln(w)
}

// us formats µs, and rate orders/s, or "–" when the servers reported no
// CPU (v <= 0).
func us(v float64) string   { return positive(v, "%.2f") }
func rate(v float64) string { return positive(v, "%.0f") }

func positive(v float64, format string) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func printCost(w io.Writer, r3, r1 *loadResult) {
	fmt.Fprintln(w, "### 2. Redis server CPU per order (INFO cpu, used_cpu_sys + used_cpu_user, before and after)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| B | orders | refused | server µs/order, all masters | per master µs/order | busiest master µs/order | client µs/order | other processes' CPU (cores) | vs B=1 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---|---:|---:|---:|---|")
	for _, r := range []*loadResult{r3, r1} {
		var per []string
		for _, m := range r.masters {
			per = append(per, m+" "+us(r.cpu[m]/float64(max(r.orders, 1))))
		}
		_, busy := r.busiest()
		ratio := "baseline"
		if r == r3 {
			ratio = "–"
			if r1.cpuPerOrder() > 0 {
				x, verdict := r3.cpuPerOrder()/r1.cpuPerOrder(), "PASS"
				if x > 1.2 {
					verdict = "FAIL"
				}
				ratio = fmt.Sprintf("%.2fx (target <= 1.2x: %s)", x, verdict)
			}
		}
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s | %s | %.2f | %s | %s |\n", r.buckets, r.orders, r.refused, us(r.cpuPerOrder()),
			strings.Join(per, "; "), us(busy), r.clientCPU/float64(max(r.orders, 1)), r.others(), ratio)
	}
	fmt.Fprintln(w)
}

// others is the CPU (cores) the machine's other processes used during
// the run: what /proc/stat counts beyond this process and the servers
// (which, for a remote cluster, are not on this machine: then it is
// an upper bound below zero, shown as it is).
func (r *loadResult) others() string {
	if r.machine <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", (r.machine-r.clientCPU-r.totalCPU())/1e6/r.elapsed.Seconds())
}

// modelRate is the model's orders/s: the busiest master saturates at one
// core-second per second.
func modelRate(cpuPerOrderUS float64) float64 {
	if cpuPerOrderUS <= 0 {
		return 0
	}
	return 1e6 / cpuPerOrderUS
}

func printModel(w io.Writer, r3, r1 *loadResult) {
	fmt.Fprintln(w, "### 3. Scaling on paper")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Model: a master saturates at 1 core-second per second, so the sale is capped by its busiest master:")
	fmt.Fprintln(w, "T = 1 / max_m(c_m), c_m = share_m × c = server CPU master m spends per order. With B = N buckets on N")
	fmt.Fprintln(w, "masters and an even spread, T_N = N / c_B (c_B: CPU per order summed over the masters, from table 2;")
	fmt.Fprintln(w, "c_1 for N = 1, c_3 for N = 2 and 3, assuming B=2 costs what B=3 does). Each master has one core of its own.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N masters | B | c_B µs/order | share of the busiest master | T_N orders/s (even spread) | T on the measured cluster: 1 / max_m c_m (table 2, B on all its masters) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	for n := 1; n <= 3; n++ {
		r := r3
		if n == 1 {
			r = r1
		}
		measured, share := "–", fmt.Sprintf("1/%d (assumed)", n)
		if r.buckets == n {
			_, busy := r.busiest()
			measured = rate(modelRate(busy))
			if r.totalCPU() > 0 {
				share = fmt.Sprintf("%.3f of CPU", busy/r.cpuPerOrder())
			}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s |\n", n, n, us(r.cpuPerOrder()), share, rate(float64(n)*modelRate(r.cpuPerOrder())), measured)
	}
	fmt.Fprintln(w)
}

// soldOutResult is the sold-out run.
type soldOutResult struct {
	units, taken, soldOut int64
	buckets               int
	left, held            int64
}

// soldOut sells units over 3 buckets to clients goroutines, each
// deducting one unit per order until its first stock.ErrSoldOut.
func soldOut(ctx context.Context, t *target, prefix string, units int64, clients int) (soldOutResult, error) {
	res := soldOutResult{units: units, buckets: 3}
	s, err := redisstock.New(t.rdb, redisstock.Config{Prefix: prefix})
	if err != nil {
		return res, err
	}
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: units, HoldTTL: time.Hour, Buckets: 3}); err != nil {
		return res, err
	}
	var taken, out atomic.Int64
	var mu sync.Mutex
	var fatal error
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				n := strconv.FormatInt(seq.Add(1), 10)
				err := s.Deduct(ctx, stock.Order{ID: "o" + n, UserID: "u" + n, Items: []stock.Item{{SKU: "hot", Qty: 1}}})
				switch {
				case err == nil:
					taken.Add(1)
					continue
				case errors.Is(err, stock.ErrSoldOut):
					out.Add(1)
				case errors.Is(err, stock.ErrContention):
					continue
				default:
					mu.Lock()
					fatal = err
					mu.Unlock()
				}
				return
			}
		})
	}
	wg.Wait()
	if fatal != nil {
		return res, fatal
	}
	res.taken, res.soldOut = taken.Load(), out.Load()
	if res.left, err = s.Available(ctx, "hot"); err != nil {
		return res, err
	}
	lv, err := s.Levels(ctx, "hot")
	res.held = lv.Held
	return res, err
}

func printSoldOut(w io.Writer, r soldOutResult) {
	fmt.Fprintln(w, "### 4. Sold-out accuracy (every client deducts until its first ErrSoldOut)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| units | B | orders taken | ErrSoldOut replies | left unsold (Available) | held (Levels) | verdict |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---|")
	verdict := "PASS"
	if r.left != 0 || r.taken != r.units || r.held != r.units {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %s |\n\n", r.units, r.buckets, r.taken, r.soldOut, r.left, r.held, verdict)
}
