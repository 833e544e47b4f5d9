package redisstock_test

import (
	"context"
	"fmt"
	"maps"
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
// in fewer commands: on the same data, an order gets the same answer from
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
	// raw runs a command on the Store's prefix ("P" in its arguments).
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range backends() {
				if strings.Contains(b.name, "cluster") {
					continue // the hot scripts' mode 'one' is a single server's
				}
				t.Run(b.name, func(t *testing.T) {
					b.need(t)
					c, _ := b.client(t)
					ctx := t.Context()
					clock := stocktest.NewClock(stocktest.Epoch)
					// The history once, its keys copied to a second
					// prefix: the same bytes (ended records carry the
					// server's time) under each script.
					prefixes := [2]string{uniquePrefix(t), uniquePrefix(t)}
					stores := [2]*redisstock.Store{
						newStore(t, c, redisstock.Config{Prefix: prefixes[0], Clock: clock}),
						newStore(t, c, redisstock.Config{Prefix: prefixes[1], Clock: clock}),
					}
					for _, h := range tc.history {
						h(ctx, t, stores[0], c, prefixes[0])
					}
					copyPrefix(ctx, t, c.(*redis.Client), prefixes[0], prefixes[1])
					var answers [2]string
					var keys [2]map[string]string
					for i, one := range []bool{false, true} {
						prefix, s := prefixes[i], stores[i]
						err, left := s.HotAlone(ctx, tc.o, one)
						answers[i] = fmt.Sprintf("%v, left %v", err, left)
						keys[i] = dumpPrefix(ctx, t, c.(*redis.Client), prefix)
					}
					if answers[0] != answers[1] {
						t.Errorf("answered %s, the hot script %s", answers[1], answers[0])
					}
					for _, k := range slices.Sorted(maps.Keys(keys[0])) {
						if keys[0][k] != keys[1][k] {
							t.Errorf("%s: %q, the hot script left %q", k, keys[1][k], keys[0][k])
						}
					}
					for k := range keys[1] {
						if _, ok := keys[0][k]; !ok {
							t.Errorf("%s: %q, the hot script left no such key", k, keys[1][k])
						}
					}
				})
			}
		})
	}
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
