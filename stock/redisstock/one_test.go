package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// stock_deduct_one.lua is stock_deduct_hot.lua for a batch of one order,
// with less Lua: on the same data, an order gets the same answer from
// both (held, refused naming the same line, or left to the general script)
// and leaves the same keys behind, byte for byte: new holds, refusals,
// repeats and conflicts, records without a directory entry and entries
// without a record, a SKU not on sale, several lines, own hold times
// before the queue's tail, users' counts.
func TestLoneOrderScriptDoesWhatTheHotScriptDoes(t *testing.T) {
	x, y, z := "a", "b", "c"
	type history func(ctx context.Context, t *testing.T, s *redisstock.Store, c redis.UniversalClient, prefix string)
	sale := func(ls ...stock.Listing) history {
		return func(ctx context.Context, t *testing.T, s *redisstock.Store, _ redis.UniversalClient, _ string) {
			for _, l := range ls {
				if err := s.PutOnSale(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	deduct := func(os ...stock.Order) history {
		return func(ctx context.Context, t *testing.T, s *redisstock.Store, _ redis.UniversalClient, _ string) {
			for _, o := range os {
				_ = s.Deduct(ctx, o) // held or refused: the same on both
			}
		}
	}
	confirm := func(id string) history {
		return func(ctx context.Context, t *testing.T, s *redisstock.Store, _ redis.UniversalClient, _ string) {
			if err := s.Confirm(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// raw runs a command on the Store's prefix ("P" in its arguments, so
	// command names are written in lower case).
	raw := func(args ...string) history {
		return func(ctx context.Context, t *testing.T, _ *redisstock.Store, c redis.UniversalClient, prefix string) {
			a := make([]any, len(args))
			for i, v := range args {
				a[i] = strings.ReplaceAll(v, "P", prefix)
			}
			if err := c.Do(ctx, a...).Err(); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
		}
	}
	own := func(o stock.Order, d time.Duration) stock.Order { o.HoldTTL = d; return o }
	limited := stock.Listing{SKU: x, Units: 10, PerUserLimit: 2, HoldTTL: time.Minute, MaxHoldTTL: 5 * time.Minute}
	open := stock.Listing{SKU: y, Units: 5, HoldTTL: 2 * time.Minute}
	third := stock.Listing{SKU: z, Units: 3, PerUserLimit: 1, HoldTTL: 3 * time.Minute, MaxHoldTTL: 3 * time.Minute}
	three := func(id, user string, qx, qy, qz int64) stock.Order {
		return ord(id, user, it(x, qx), it(y, qy), it(z, qz))
	}
	for _, tc := range []struct {
		name    string
		history []history
		o       stock.Order
	}{
		{"new, a user", []history{sale(limited)}, ord("o", "u", it(x, 1))},
		{"new, no user, no limit", []history{sale(open)}, ord("o", "", it(y, 2))},
		{"no user, a limit", []history{sale(limited)}, ord("o", "", it(x, 1))},
		{"a user's second", []history{sale(limited), deduct(ord("p", "u", it(x, 1)))}, ord("o", "u", it(x, 1))},
		{"a user past the limit", []history{sale(limited), deduct(ord("p", "u", it(x, 2)))}, ord("o", "u", it(x, 1))},
		{"a user's count without a limit", []history{sale(open), deduct(ord("p", "u", it(y, 2)))}, ord("o", "u", it(y, 2))},
		{"sold out", []history{sale(open)}, ord("o", "u", it(y, 6))},
		{"the last units", []history{sale(open), deduct(ord("p", "v", it(y, 3)))}, ord("o", "u", it(y, 2))},
		{"own hold time", []history{sale(limited)}, own(ord("o", "u", it(x, 1)), 4*time.Minute)},
		{"own hold time past the maximum", []history{sale(limited)}, own(ord("o", "u", it(x, 1)), 6*time.Minute)},
		{"own hold before the queue's tail", []history{sale(limited), deduct(own(ord("p", "v", it(x, 1)), 5*time.Minute))}, own(ord("o", "u", it(x, 1)), 2*time.Minute)},
		{"a repeat", []history{sale(limited), deduct(ord("o", "u", it(x, 1)))}, ord("o", "u", it(x, 1))},
		{"a repeat, now sold out", []history{sale(open), deduct(ord("o", "u", it(y, 5)))}, ord("o", "u", it(y, 5))},
		{"a conflict", []history{sale(limited), deduct(ord("o", "u", it(x, 1)))}, ord("o", "u", it(x, 2))},
		{"a confirmed order's ID", []history{sale(limited), deduct(ord("o", "u", it(x, 1))), confirm("o")}, ord("o", "u", it(x, 1))},
		{"a record without an entry", []history{sale(limited), deduct(ord("o", "u", it(x, 1))), raw("HDEL", "P:dir:{d0.12}", "o")}, ord("o", "u", it(x, 1))},
		{"an entry without a record", []history{sale(limited), deduct(ord("o", "u", it(x, 1))), raw("HDEL", "P:{a}:lines", "o")}, ord("o", "u", it(x, 1))},
		{"a record without an entry, of a later line", []history{sale(limited, open, third), deduct(three("o", "u", 1, 1, 1)), raw("HDEL", "P:dir:{d0.12}", "o"), raw("HDEL", "P:{a}:lines", "o")}, three("o", "u", 1, 1, 1)},
		{"not on sale", []history{sale(open)}, ord("o", "u", it(x, 1))},
		{"three lines", []history{sale(limited, open, third)}, three("o", "u", 1, 2, 1)},
		{"three lines, the second sold out", []history{sale(limited, open, third)}, three("o", "u", 1, 6, 1)},
		{"three lines, the third past its limit", []history{sale(limited, open, third), deduct(ord("p", "u", it(z, 1)))}, three("o", "u", 1, 1, 1)},
		{"three lines, past the shortest maximum", []history{sale(limited, open, third)}, own(three("o", "u", 1, 1, 1), 4*time.Minute)},
		{"three lines, a third not on sale", []history{sale(limited, open)}, three("o", "u", 1, 1, 1)},
		// Counts that are not numbers fail the call only where the hot
		// script's would (a repeat, a refusal need none of them), and
		// fractions, zeros and odd bytes are read and written alike.
		{"a repeat, avail not a number", []history{sale(open), deduct(ord("o", "u", it(y, 1))), raw("HSET", "P:{b}:state", "avail", "x")}, ord("o", "u", it(y, 1))},
		{"a repeat, held not a number", []history{sale(open), deduct(ord("o", "u", it(y, 1))), raw("HSET", "P:{b}:state", "held", "x")}, ord("o", "u", it(y, 1))},
		{"sold out, held not a number", []history{sale(open), raw("HSET", "P:{b}:state", "held", "x")}, ord("o", "u", it(y, 9))},
		{"sold out, limit not a number", []history{sale(open), raw("HSET", "P:{b}:state", "limit", "x")}, ord("o", "u", it(y, 9))},
		{"sold out, max_ms not a number", []history{sale(open), raw("HSET", "P:{b}:state", "max_ms", "x")}, ord("o", "u", it(y, 9))},
		{"sold out, the user's count not a number", []history{sale(open), raw("HSET", "P:{b}:users", "u", "x")}, ord("o", "u", it(y, 9))},
		{"a user's count of zero", []history{sale(open), raw("HSET", "P:{b}:users", "u", "0")}, ord("o", "u", it(y, 1))},
		{"a user's count with a fraction", []history{sale(limited), raw("HSET", "P:{a}:users", "u", "0.5")}, ord("o", "u", it(x, 1))},
		{"avail with a fraction", []history{sale(limited), raw("HSET", "P:{a}:state", "avail", "1.5")}, ord("o", "u", it(x, 1))},
		{"a queue tail not a number", []history{sale(open), raw("rpush", "P:{b}:hq", "zz p")}, ord("o", "u", it(y, 1))},
		{"a queue tail without a space, sold out", []history{sale(open), raw("rpush", "P:{b}:hq", "nospace")}, ord("o", "u", it(y, 9))},
		{"a queue tail without a space, a repeat", []history{sale(open), deduct(ord("o", "u", it(y, 1))), raw("rpush", "P:{b}:hq", "nospace")}, ord("o", "u", it(y, 1))},
		{"odd bytes", []history{sale(open)}, ord("o\t\n \x00\xff", "u\t \xff", it(y, 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachOneServer(t, func(t *testing.T, c *redis.Client) {
				// The history once, its keys copied to a second prefix:
				// the same bytes (ended records carry the server's time)
				// under each script.
				p := newScriptPair(t, c, stocktest.NewClock(stocktest.Epoch))
				for _, h := range tc.history {
					h(t.Context(), t, p.stores[0], c, p.prefixes[0])
				}
				if diffs, _, _ := p.run(t, tc.o); len(diffs) > 0 {
					t.Error(strings.Join(diffs, "\n"))
				}
			})
		})
	}
}

// Random histories of Deducts (several lines, own hold times, orders
// without a user), Confirms, Reverts, reclaims and clock steps, then one
// order through each script on copies of the keys: the same answer and
// the same keys.
func TestLoneOrderScriptAfterRandomHistories(t *testing.T) {
	skus := []string{"a", "b", "c"}
	ids := []string{"o1", "o2", "o3", "o4", "o5"}
	users := []string{"", "u", "v"}
	randOrder := func(r *rand.Rand) stock.Order {
		o := stock.Order{ID: ids[r.IntN(len(ids))], UserID: users[r.IntN(len(users))]}
		for _, sku := range skus {
			if r.IntN(2) == 0 {
				o.Items = append(o.Items, it(sku, int64(1+r.IntN(3))))
			}
		}
		if len(o.Items) == 0 {
			o.Items = append(o.Items, it(skus[r.IntN(len(skus))], int64(1+r.IntN(3))))
		}
		if r.IntN(3) == 0 {
			o.HoldTTL = time.Duration(1+r.IntN(6)) * time.Minute
		}
		return o
	}
	eachOneServer(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		answers := map[string]int{} // the hot script's, by kind
		for seed := range uint64(150) {
			r := rand.New(rand.NewPCG(seed, 1))
			clock := stocktest.NewClock(stocktest.Epoch)
			p := newScriptPair(t, c, clock)
			s := p.stores[0]
			var log []string
			for _, sku := range skus {
				hold := time.Duration(1+r.IntN(3)) * time.Minute
				l := stock.Listing{SKU: sku, Units: int64(2 + r.IntN(8)), PerUserLimit: int64(r.IntN(4)),
					HoldTTL: hold, MaxHoldTTL: hold + time.Duration(r.IntN(3))*time.Minute}
				if err := s.PutOnSale(ctx, l); err != nil {
					t.Fatal(err)
				}
				log = append(log, fmt.Sprintf("%+v", l))
			}
			for n := r.IntN(10); n > 0; n-- {
				id := ids[r.IntN(len(ids))]
				switch r.IntN(7) {
				case 0, 1, 2:
					o := randOrder(r)
					log = append(log, fmt.Sprintf("deduct %+v: %v", o, s.Deduct(ctx, o)))
				case 3:
					log = append(log, fmt.Sprintf("confirm %s: %v", id, s.Confirm(ctx, id)))
				case 4:
					log = append(log, fmt.Sprintf("revert %s: %v", id, s.Revert(ctx, id)))
				case 5:
					d := time.Duration(r.IntN(5)) * time.Minute
					clock.Advance(d)
					log = append(log, fmt.Sprintf("advance %v", d))
				case 6:
					got, err := s.ReclaimExpired(ctx, 100)
					log = append(log, fmt.Sprintf("reclaim %v %v", got, err))
				}
			}
			o := randOrder(r)
			diffs, left, err := p.run(t, o)
			if len(diffs) > 0 {
				t.Errorf("seed %d, %+v after:\n%s\n%s", seed, o, strings.Join(log, "\n"), strings.Join(diffs, "\n"))
			}
			switch {
			case left:
				answers["left"]++
			case err == nil:
				answers["held"]++
			default:
				answers["refused"]++
			}
		}
		// The histories reach every kind of answer.
		if answers["left"] == 0 || answers["held"] == 0 || answers["refused"] == 0 {
			t.Errorf("answers %v: a kind never came", answers)
		}
	})
}

// eachOneServer runs f on each single-server backend (the hot scripts'
// mode 'one' is a single server's).
func eachOneServer(t *testing.T, f func(t *testing.T, c *redis.Client)) {
	for _, b := range backends() {
		if strings.Contains(b.name, "cluster") {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			c, _ := b.client(t)
			f(t, c.(*redis.Client))
		})
	}
}

// scriptPair is two Stores on c under prefixes of their own, on one clock:
// a history is written under the first, and copied to the second before
// an order runs through each script.
type scriptPair struct {
	c        *redis.Client
	prefixes [2]string
	stores   [2]*redisstock.Store
}

func newScriptPair(t *testing.T, c *redis.Client, clock stock.Clock) *scriptPair {
	p := &scriptPair{c: c, prefixes: [2]string{uniquePrefix(t), uniquePrefix(t)}}
	for i, prefix := range p.prefixes {
		p.stores[i] = newStore(t, c, redisstock.Config{Prefix: prefix, Clock: clock})
	}
	return p
}

// run copies the keys under the first prefix to the second, runs o alone
// through stock_deduct_hot.lua on the first and stock_deduct_one.lua on
// the second, and returns every difference in their answers and in the
// keys they leave, and the hot script's answer (see HotAlone).
func (p *scriptPair) run(t *testing.T, o stock.Order) (diffs []string, hotLeft bool, hotErr error) {
	t.Helper()
	ctx := t.Context()
	copyPrefix(ctx, t, p.c, p.prefixes[0], p.prefixes[1])
	var answers [2]string
	var keys [2]map[string]string
	for i, one := range []bool{false, true} {
		left, err := p.stores[i].HotAlone(ctx, o, one)
		if i == 0 {
			hotLeft, hotErr = left, err
		}
		answers[i] = fmt.Sprintf("%v, left %v", err, left)
		if err != nil && !stock.IsBusiness(err) {
			answers[i] = "failed" // the scripts' errors name their own lines
		}
		keys[i] = dumpPrefix(ctx, t, p.c, p.prefixes[i])
	}
	if answers[0] != answers[1] {
		diffs = append(diffs, fmt.Sprintf("answered %s, the hot script %s", answers[1], answers[0]))
	}
	for _, k := range slices.Sorted(maps.Keys(keys[0])) {
		if keys[0][k] != keys[1][k] {
			diffs = append(diffs, fmt.Sprintf("%s: %q, the hot script left %q", k, keys[1][k], keys[0][k]))
		}
	}
	for k := range keys[1] {
		if _, ok := keys[0][k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %q, the hot script left no such key", k, keys[1][k]))
		}
	}
	return diffs, hotLeft, hotErr
}

// copyPrefix copies every key under from to the same name under to.
func copyPrefix(ctx context.Context, t *testing.T, c *redis.Client, from, to string) {
	t.Helper()
	keys, err := c.Keys(ctx, from+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := c.Copy(ctx, k, to+strings.TrimPrefix(k, from), 0, true).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// dumpPrefix reads every key under prefix: its name without the prefix ->
// its type and contents (a state's random generation left out).
func dumpPrefix(ctx context.Context, t *testing.T, c *redis.Client, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	keys, err := c.Keys(ctx, prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "hash":
			m, err := c.HGetAll(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			delete(m, "gen")
			v = fmt.Sprint(m) // fmt sorts a map's keys
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		default:
			v, err = c.Get(ctx, k).Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(k, prefix)] = typ + " " + fmt.Sprint(v)
	}
	return out
}

// A repeat of a held order, and its ID with other items, write nothing:
// on a server that refuses writes for the moment (at its maxmemory under
// noeviction, or without the replicas min-replicas-to-write asks for) a
// lone Deduct still answers them, nil and ErrConflict, as the hot and
// general scripts answer them, and so it does an order whose line record
// is there without its directory entry (as while Retention purges an
// ended order); a new order gets the server's refusal.
func TestLoneRepeatOnAServerRefusingWrites(t *testing.T) {
	for _, tc := range []struct {
		name       string
		refuse, ok []string // CONFIG SET arguments
		refusal    string   // the server's error for a write
	}{
		{"maxmemory", []string{"maxmemory-policy", "noeviction", "maxmemory", "1"}, []string{"maxmemory", "0"}, "OOM"},
		{"min-replicas", []string{"min-replicas-to-write", "1"}, []string{"min-replicas-to-write", "0"}, "NOREPLICAS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMaster(t)
			c := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { c.Close() })
			ctx := t.Context()
			s := newStore(t, c, redisstock.Config{Prefix: uniquePrefix(t), Clock: stocktest.NewClock(stocktest.Epoch)})
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			o := ord("o", "u", it("a", 1))
			if err := s.Deduct(ctx, o); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, ord("q", "u", it("a", 1))); err != nil {
				t.Fatal(err)
			}
			if err := c.HDel(ctx, s.DirKey("q"), "q").Err(); err != nil {
				t.Fatal(err)
			}
			set := func(args []string) {
				t.Helper()
				for i := 0; i < len(args); i += 2 {
					if err := c.ConfigSet(ctx, args[i], args[i+1]).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			set(tc.refuse)
			defer set(tc.ok)
			if err := s.Deduct(ctx, o); err != nil {
				t.Errorf("a repeat of a held order: %v, want nil", err)
			}
			if err := s.Deduct(ctx, ord("o", "u", it("a", 2))); !errors.Is(err, stock.ErrConflict) {
				t.Errorf("its ID with other items: %v, want ErrConflict", err)
			}
			if err := s.Deduct(ctx, ord("q", "u", it("a", 2))); !errors.Is(err, stock.ErrConflict) {
				t.Errorf("the ID of a record without its directory entry, with other items: %v, want ErrConflict", err)
			}
			if err := s.Deduct(ctx, ord("p", "v", it("a", 1))); err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Errorf("a new order: %v, want the server's %s", err, tc.refusal)
			}
			set(tc.ok)
			if err := s.Deduct(ctx, ord("p", "v", it("a", 1))); err != nil {
				t.Errorf("a new order once the server writes again: %v", err)
			}
		})
	}
}
