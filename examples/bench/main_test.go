package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"-clients", "0"}, {"-clients", "x"}, {"-duration", "1ms"}, {"-rounds", "0"}, {"extra"}, {"-nope"}} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// cells splits a table line into its cells.
func cells(line string) []string {
	c := strings.Split(strings.Trim(line, "|"), "|")
	for i := range c {
		c[i] = strings.TrimSpace(c[i])
	}
	return c
}

func TestEmbeddedTable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"-duration", "100ms", "-clients", "2", "-rounds", "1"}, &out, &errb); code != 0 {
		t.Fatalf("run = %d; stderr:\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// Header, separator, 4 Redis cases and 8 SQLite cases.
	if len(lines) != 14 {
		t.Fatalf("table has %d lines, want 14:\n%s", len(lines), out.String())
	}
	head := cells(lines[0])
	col := func(name string) int {
		for i, h := range head {
			if strings.HasPrefix(h, name) {
				return i
			}
		}
		t.Fatalf("no column %q in %q", name, lines[0])
		return -1
	}
	deducts, vs, batches, cpu, sys := col("deducts/s"), col("vs baseline"), col("orders per batch"), col("server CPU"), col("of it system")
	baselines := 0
	for _, l := range lines[2:] {
		c := cells(l)
		if len(c) != len(head) {
			t.Fatalf("%d cells, want %d: %s", len(c), len(head), l)
		}
		if c[deducts] == "0" {
			t.Errorf("a case made no progress: %s", l)
		}
		if c[vs] == "baseline" {
			baselines++
		}
		// miniredis reports no server figures.
		if c[cpu] != "–" || c[sys] != "–" {
			t.Errorf("server CPU %q (system %q) without a real server: %s", c[cpu], c[sys], l)
		}
		// The batching Deducts and the grouping sqlstock report their
		// batches (a call alone is a batch of 1); the raw baselines,
		// MaxBatch 1 and the ungrouped or unbatched strategies none.
		batching := c[1] == "redisstock Deduct" || c[1] == "redisstock Deduct, 3-item order" ||
			strings.HasPrefix(c[1], "sqlstock atomic grouped")
		if got := c[batches] != "–"; got != batching {
			t.Errorf("batch sizes %q: %s", c[batches], l)
		}
	}
	if baselines != 2 {
		t.Errorf("%d baselines in the table, want 2", baselines)
	}
}

// recorder is a Manager that keeps the orders it is given.
type recorder struct {
	stock.Manager
	mu     sync.Mutex
	orders []stock.Order
}

func (r *recorder) Deduct(ctx context.Context, o stock.Order) error {
	r.mu.Lock()
	r.orders = append(r.orders, o)
	r.mu.Unlock()
	return r.Manager.Deduct(ctx, o)
}

// The default cases deduct a flash sale's orders: each its own ID and its
// own user, on SKUs with a per-user limit of 1, so a second order of one
// of those users is refused. -anonymous orders have no user and no limit.
func TestFlashSaleOrders(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	for _, anonymous := range []bool{false, true} {
		prefix := "flash"
		if anonymous {
			prefix = "anon"
		}
		s, err := redisstock.New(rdb, redisstock.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		sh := shape{anonymous: anonymous}
		for _, items := range []int{1, 3} {
			r := recorder{Manager: s}
			bc := managerCase("one line", &r, sh, 1)
			if items == 3 {
				bc = orderCase("3 lines", &r, sh, 3)
			}
			if err := bc.prep(ctx); err != nil {
				t.Fatal(err)
			}
			for seq := range int64(5) {
				if err := bc.op(ctx, seq); err != nil {
					t.Fatalf("anonymous %v, %d items, order %d: %v", anonymous, items, seq, err)
				}
			}
			ids, users := map[string]bool{}, map[string]bool{}
			for _, o := range r.orders {
				ids[o.ID], users[o.UserID] = true, true
			}
			if len(ids) != 5 {
				t.Errorf("anonymous %v, %d items: %d order IDs in 5 orders", anonymous, items, len(ids))
			}
			again := r.orders[0]
			again.ID += "-again"
			err := s.Deduct(ctx, again)
			if anonymous {
				if len(users) != 1 || again.UserID != "" {
					t.Errorf("anonymous orders with users %v", users)
				}
				if err != nil {
					t.Errorf("%d items: a second anonymous order: %v, want nil (no limit)", items, err)
				}
				continue
			}
			if len(users) != 5 {
				t.Errorf("%d items: %d users in 5 orders", items, len(users))
			}
			if !errors.Is(err, stock.ErrLimitReached) {
				t.Errorf("%d items: a second order of user %q: %v, want ErrLimitReached", items, again.UserID, err)
			}
		}
	}
}

func TestParseInfo(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n\r\n" +
		"# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=400,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=2,usec=100,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=30,usec=60,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n"
	st, err := parseInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	want := serverStats{cpu: 3.75e6, sys: 1.5e6, scriptUsec: 500, scriptCalls: 12, commands: 42}
	if math.Abs(st.cpu-want.cpu) > 1e-6 || math.Abs(st.sys-want.sys) > 1e-6 || st.scriptUsec != want.scriptUsec ||
		st.scriptCalls != want.scriptCalls || st.commands != want.commands {
		t.Errorf("parseInfo = %+v, want %+v", st, want)
	}
	for _, bad := range []string{
		"used_cpu_sys:1\r\n", // no user CPU
		"used_cpu_sys:1\r\nused_cpu_user:x\r\n",
		"used_cpu_sys:1\r\nused_cpu_user:1\r\ncmdstat_get:calls=1\r\n", // no usec
	} {
		if _, err := parseInfo(bad); err == nil {
			t.Errorf("parseInfo(%q): no error", bad)
		}
	}
}

// A Cluster's counters are the sum of its masters'; a case's figures are
// what they grew by, per order.
func TestServerStatsPerOrder(t *testing.T) {
	a := serverStats{cpu: 100, sys: 40, scriptUsec: 50, scriptCalls: 2, commands: 8}
	b := serverStats{cpu: 300, sys: 60, scriptUsec: 70, scriptCalls: 4, commands: 12}
	sum := a.plus(b)
	if want := (serverStats{cpu: 400, sys: 100, scriptUsec: 120, scriptCalls: 6, commands: 20}); sum != want {
		t.Errorf("plus = %+v, want %+v", sum, want)
	}
	later := serverStats{cpu: 1400, sys: 300, scriptUsec: 220, scriptCalls: 26, commands: 60}
	if got, want := later.per(sum, 10), (serverStats{cpu: 100, sys: 20, scriptUsec: 10, scriptCalls: 2, commands: 4}); got != want {
		t.Errorf("per = %+v, want %+v", got, want)
	}
}

func TestBatchSummary(t *testing.T) {
	var b batchStats
	if _, _, ok := b.summary(); ok {
		t.Error("summary of no batch: ok")
	}
	for _, size := range []int{1, 1, 6, 8, 40, 64, 200} {
		b.add(size)
	}
	mean, share, ok := b.summary()
	// 320 orders in 7 batches: 2 alone, 6 in 2–7, 8 in 8–31, 40 in 32–63,
	// 264 in 64+.
	want := [len(sizeBounds)]float64{2, 6, 8, 40, 264}
	for k := range want {
		want[k] = 100 * want[k] / 320
	}
	if !ok || math.Abs(mean-320.0/7) > 1e-9 || share != want {
		t.Errorf("summary = %v, %v, %v; want %v, %v", mean, share, ok, 320.0/7, want)
	}
	b.reset()
	if _, _, ok := b.summary(); ok {
		t.Error("summary after reset: ok")
	}
}

// The memory per hold is read once the server has freed what an earlier
// run UNLINKed: a read while objects are pending is not taken.
func TestSettledMemory(t *testing.T) {
	replies := []string{
		"# Memory\r\nused_memory:900000\r\nlazyfree_pending_objects:120\r\n",
		"# Memory\r\nused_memory:500000\r\nlazyfree_pending_objects:3\r\n",
		"# Memory\r\nused_memory:200000\r\nlazyfree_pending_objects:0\r\n",
	}
	reads := 0
	info := func(context.Context) (string, error) {
		r := replies[min(reads, len(replies)-1)]
		reads++
		return r, nil
	}
	got, err := settledMemory(t.Context(), info, 0)
	if err != nil || got != 200000 || reads != 3 {
		t.Errorf("settledMemory = %v, %v after %d reads; want 200000 after 3", got, err, reads)
	}
	// A server that reports no lazy free (an older one) is read at once.
	reads = 0
	replies = []string{"used_memory:1234\r\n"}
	if got, err := settledMemory(t.Context(), info, 0); err != nil || got != 1234 || reads != 1 {
		t.Errorf("settledMemory = %v, %v after %d reads; want 1234 after 1", got, err, reads)
	}
	// Objects that stay pending: an error, not a figure.
	reads = 0
	replies = []string{"used_memory:1\r\nlazyfree_pending_objects:7\r\n"}
	if got, err := settledMemory(t.Context(), info, 0); err == nil {
		t.Errorf("settledMemory = %v with objects always pending, want an error", got)
	}
}
