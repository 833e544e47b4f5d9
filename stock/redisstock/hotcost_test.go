package redisstock

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/canon"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

// BenchmarkHotScript sends b.N flash-sale orders (a new order ID and a new
// user each, on SKUs put on sale with PerUserLimit 1) straight to
// stock_deduct_hot.lua through deductHot (the slot cases: through
// deductHotSlot, mode 'slot', as a Cluster's take sends bound attempts),
// in calls of a fixed size, with no batcher and no concurrency, and
// reports the server's time inside the
// script per order: the usec of script calls in INFO commandstats
// (testdb.ScriptStats), read before and after (no CONFIG RESETSTAT). It
// fails when the server counts other script calls than its own meanwhile
// (another client's would skew the figure), and when an order is not
// held. A warm-up of 1,000 orders first makes the SKU's hashes large
// enough to leave their listpack encoding, as in a sale. Run, on a Redis
// of its own:
//
//	STOCKGUARD_REDIS_ADDR=127.0.0.1:6400 go test -run '^$' -bench HotScript -benchtime 8000x ./stock/redisstock/
//
// internal/tools/scriptcost.sh runs it on a redis-server under callgrind
// and gives the server's instructions per order instead, which do not
// depend on the machine's load.
func BenchmarkHotScript(b *testing.B) {
	addr := testdb.Need(b, testdb.Redis)
	for _, bc := range []struct {
		slot         bool
		lines, batch int
	}{{false, 1, 20}, {false, 3, 20}, {false, 1, 5}, {false, 1, 1}, {true, 1, 20}} {
		name := fmt.Sprintf("lines=%d/batch=%d", bc.lines, bc.batch)
		if bc.slot {
			name = "slot/" + name // mode 'slot', as a Cluster's take sends it (bound attempts)
		}
		b.Run(name, func(b *testing.B) {
			benchHot(b, addr, bc.slot, bc.lines, bc.batch)
		})
	}
}

func benchHot(b *testing.B, addr string, slot bool, lines, batch int) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	prefix := fmt.Sprintf("sghot-%d", time.Now().UnixNano())
	defer testdb.DropKeys(ctx, c, prefix)
	s, err := New(c, Config{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	items := make([]stock.Item, lines)
	for j := range items {
		items[j] = stock.Item{SKU: "hot" + strconv.Itoa(j), Qty: 1}
		if err := s.PutOnSale(ctx, stock.Listing{SKU: items[j].SKU, Units: 1 << 40, PerUserLimit: 1, HoldTTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	gens := make(map[string]string, lines) // SKU -> its state's generation
	for _, it := range items {
		gen, err := c.HGet(ctx, s.stateKey(it.SKU), "gen").Result()
		if err != nil {
			b.Fatal(err)
		}
		gens[it.SKU] = gen
	}
	seq := 0
	run := func(orders int) {
		for orders > 0 {
			n := min(batch, orders)
			orders -= n
			calls := make([]*call, n)
			for i := range calls {
				seq++
				id := strconv.Itoa(seq)
				o := stock.Order{ID: "o" + id, UserID: "u" + id, Items: items}
				calls[i] = &call{ctx: ctx}
				if slot {
					calls[i].a = benchAttempt(b, s, o, gens)
				} else {
					s.prepare(&calls[i].o, o)
				}
			}
			if slot {
				var cmd *redis.Cmd
				s.pipelined(ctx, func(p redis.Pipeliner) { cmd = s.deductHotSlot(ctx, p, calls) })
				for i, c := range calls {
					if _, _, err := s.groupResult(ctx, partReply(cmd, i), c.a.groups[0]); err != nil {
						b.Fatalf("hot script, mode slot: %v", err)
					}
				}
				continue
			}
			slow, err := s.deductHot(ctx, calls)
			if err != nil || len(slow) > 0 {
				b.Fatalf("hot script: %v, %d orders left to the general script", err, len(slow))
			}
			for _, c := range calls {
				if c.err != nil {
					b.Fatal(c.err)
				}
			}
		}
	}
	run(1000)
	calls0, usec0, _, err := testdb.ScriptStats(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	calls1, usec1, _, err := testdb.ScriptStats(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	if want := float64((b.N + batch - 1) / batch); calls1-calls0 != want {
		b.Fatalf("the server counted %v script calls where the benchmark made %v: another client shares it", calls1-calls0, want)
	}
	b.ReportMetric((usec1-usec0)/float64(b.N), "script-µs/order")
}

// benchAttempt is the attempt of o, bound, as deductAttempt makes it: its
// own token, begun now, on the generations gens.
func benchAttempt(b *testing.B, s *Store, o stock.Order, gens map[string]string) *attempt {
	token, err := attemptToken()
	if err != nil {
		b.Fatal(err)
	}
	now := s.nowMs()
	items := canon.Sorted(o.Items)
	return &attempt{o: o, ident: o.UserID + "\n" + canon.Signature(items), now: now, groups: [][]stock.Item{items}, gens: gens,
		token: token + "." + strconv.FormatInt(now+s.attemptLease(), 36)}
}
