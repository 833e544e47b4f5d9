package redisstock_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// The scripts as the Store sends them.
var (
	rhHot   = redis.NewScript(lua.Script("stock_deduct_hot.lua"))
	rhBatch = redis.NewScript(lua.Script("stock_deduct_batch.lua"))
	rhSlot  = redis.NewScript(lua.Script("stock_deduct.lua"))
)

type rhSKU struct {
	name                     string
	avail, limit, hold, maxh int64 // maxh 0: no max_ms field
}

type rhOrder struct {
	id, user string
	qty      []int64 // one per SKU, in SKU order
	own      int64
}

func (o rhOrder) ident(skus []rhSKU) string {
	var b strings.Builder
	b.WriteString(o.user + "\n")
	idx := make([]int, len(skus))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, c int) bool { return skus[idx[a]].name < skus[idx[c]].name })
	for _, i := range idx {
		b.WriteString(skus[i].name + "\x1f" + strconv.FormatInt(o.qty[i], 10) + "\x1e")
	}
	return b.String()
}

// rhEnv is one prefix on one server with a Store (for its key names).
type rhEnv struct {
	fx     *fixture
	s      *redisstock.Store
	prefix string
}

// newRhEnv is an environment of its own prefix, and a Store on it, on fx's
// server.
func newRhEnv(t *testing.T, fx *fixture) rhEnv {
	e := rhEnv{fx: fx, prefix: uniquePrefix(t)}
	e.s = newStore(t, fx.c, redisstock.Config{Prefix: e.prefix, Clock: fx.clock})
	return e
}

// eachHotMode runs f for the hot script's two modes ('one', 'slot') on each
// backend the scripts can be called on directly: one server, not a
// Cluster; realOnly leaves out miniredis (its Lua is not Redis's).
func eachHotMode(t *testing.T, realOnly bool, f func(t *testing.T, fx *fixture, slot bool)) {
	for _, slot := range []bool{false, true} {
		t.Run(map[bool]string{false: "one", true: "slot"}[slot], func(t *testing.T) {
			each(t, func(t *testing.T, fx *fixture) {
				if strings.Contains(fx.t.Name(), "cluster") || realOnly && fx.mini != nil {
					t.Skip("the scripts are called directly on one server (realOnly: Redis's own Lua)")
				}
				f(t, fx, slot)
			})
		})
	}
}

func (e rhEnv) key(sku, suffix string) string { return e.prefix + ":{" + sku + "}:" + suffix }

func (e rhEnv) put(skus []rhSKU) {
	ctx := e.fx.ctx()
	for _, k := range skus {
		args := []any{"avail", k.avail, "held", 0, "sold", 0, "limit", k.limit, "hold", k.hold, "ver", 0, "gen", "g-" + k.name}
		if k.maxh > 0 {
			args = append(args, "max_ms", k.maxh)
		}
		if err := e.fx.c.HSet(ctx, e.key(k.name, "state"), args...).Err(); err != nil {
			e.fx.t.Fatal(err)
		}
		if err := e.fx.c.SAdd(ctx, e.prefix+":skus", k.name, "{layout:2/1}").Err(); err != nil {
			e.fx.t.Fatal(err)
		}
	}
}

// general runs orders through stock_deduct_batch.lua (mode one) or
// stock_deduct.lua (slot), all in one call, and returns the replies
// normalized to strings.
func (e rhEnv) general(slot bool, now int64, skus []rhSKU, orders []rhOrder) []string {
	ctx := e.fx.ctx()
	var keys []string
	var args []any
	if !slot {
		args = append(args, now)
	}
	for _, o := range orders {
		if !slot {
			keys = append(keys, e.s.DirKey(o.id))
		}
		for _, k := range skus {
			keys = append(keys, e.key(k.name, "state"), e.key(k.name, "holds"), e.key(k.name, "users"), e.key(k.name, "lines"))
		}
		if slot {
			args = append(args, now, o.id, o.user, o.ident(skus), "t"+o.id, 0, o.own, 0, "1", 0, 0, len(skus))
		} else {
			args = append(args, o.id, o.user, o.ident(skus), o.own, len(skus))
		}
		for i, q := range o.qty {
			args = append(args, q)
			if slot {
				args = append(args, "g-"+skus[i].name) // the generation the attempt read
			}
		}
	}
	if !slot {
		keys = append(keys, e.prefix+":skus")
	}
	sc := rhBatch
	if slot {
		sc = rhSlot
	}
	res, err := sc.Run(ctx, e.fx.c, keys, args...).Slice()
	if err != nil {
		e.fx.t.Fatal(err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = rhOutcome(r)
	}
	return out
}

// rhOutcome is an order's reply as stock_deduct_hot.lua gives it, in
// either mode: the general script's reply on a slot ({'ok', ...} or
// {code, line, found}) becomes 0 or code + 16 * line, which is all the
// hot script answers (the deadline and bound the general script also
// answers are in the records the tests compare); any other reply is
// printed as it is.
func rhOutcome(r any) string {
	v, ok := r.([]any)
	if !ok || len(v) < 2 {
		return fmt.Sprint(r)
	}
	name, _ := v[0].(string)
	line, _ := v[1].(int64)
	switch code, known := map[string]int64{"sold_out": 3, "limit": 4, "need_user": 5, "hold_too_long": 9}[name]; {
	case name == "ok":
		return "0"
	case known && len(v) == 3:
		return fmt.Sprint(code + 16*line)
	}
	return fmt.Sprint(r)
}

// rhHotCall is the keys and arguments of one stock_deduct_hot.lua call of
// orders (in mode 'slot', each order's attempt is "t" + its ID, begun at
// now, on the generations put gave the SKUs' states).
func rhHotCall(e rhEnv, slot bool, now int64, skus []rhSKU, orders []rhOrder) ([]string, []any) {
	var keys []string
	for _, k := range skus {
		keys = append(keys, e.key(k.name, "state"), e.key(k.name, "holds"), e.key(k.name, "users"), e.key(k.name, "lines"))
	}
	args := []any{now, "one", len(skus)}
	if slot {
		gens := make([]string, len(skus))
		for i, k := range skus {
			gens[i] = "g-" + k.name
		}
		args[0], args[1] = strings.Join(gens, " "), "slot"
	} else {
		keys = append(keys, e.s.DirKey(orders[0].id))
		for _, k := range skus {
			keys = append(keys, e.key(k.name, "hq"))
		}
	}
	for _, o := range orders {
		args = append(args, o.id, o.user, o.ident(skus), o.own)
		if slot {
			args = append(args, "t"+o.id, now)
		}
		for _, q := range o.qty {
			args = append(args, q)
		}
	}
	return keys, args
}

// hot runs orders as the Store does: stock_deduct_hot.lua, then the
// orders it answered 15 through the general script.
func (e rhEnv) hot(slot bool, now int64, skus []rhSKU, orders []rhOrder) []string {
	ctx := e.fx.ctx()
	keys, args := rhHotCall(e, slot, now, skus, orders)
	res, err := rhHot.Run(ctx, e.fx.c, keys, args...).Slice()
	if err != nil {
		e.fx.t.Fatal(err)
	}
	out := make([]string, len(res))
	var left []rhOrder
	var at []int
	for i, r := range res {
		if v, ok := r.(int64); ok && v == 15 {
			left = append(left, orders[i])
			at = append(at, i)
			continue
		}
		out[i] = rhOutcome(r)
	}
	if len(left) > 0 {
		more := e.general(slot, now, skus, left)
		for j, i := range at {
			out[i] = more[j]
		}
	}
	return out
}

// dump reads every key of the SKUs and the directory, by suffix.
func (e rhEnv) dump(skus []rhSKU, ids []string) map[string]any {
	ctx := e.fx.ctx()
	out := map[string]any{}
	for _, k := range skus {
		st := e.fx.c.HGetAll(ctx, e.key(k.name, "state")).Val()
		out[k.name+":state"] = st
		// The holds, wherever the script placed them: the zset, or the
		// hold queue of the hot script on one server.
		var holds []string
		for _, z := range e.fx.c.ZRangeWithScores(ctx, e.key(k.name, "holds"), 0, -1).Val() {
			holds = append(holds, fmt.Sprintf("%s %d", z.Member, int64(z.Score)))
		}
		for _, q := range e.fx.c.LRange(ctx, e.key(k.name, "hq"), 0, -1).Val() {
			dl, id, _ := strings.Cut(q, " ")
			holds = append(holds, id+" "+dl)
		}
		slices.Sort(holds)
		out[k.name+":holds"] = holds
		out[k.name+":users"] = e.fx.c.HGetAll(ctx, e.key(k.name, "users")).Val()
		out[k.name+":lines"] = e.fx.c.HGetAll(ctx, e.key(k.name, "lines")).Val()
	}
	out["dir"] = e.fx.c.HGetAll(ctx, e.s.DirKey("x")).Val()
	return out
}

// Differential: random batches of orders of the same SKUs through the hot
// script (and the general script for what it leaves) and through the
// general script alone, on identical states, must answer alike and leave
// identical keys. Repeats and conflicts come from orders taken before.
func TestReviewHotDifferentialRandom(t *testing.T) {
	eachHotMode(t, false, func(t *testing.T, fx *fixture, slot bool) {
		iters := 120
		if fx.mini == nil {
			iters = 60
		}
		rng := rand.New(rand.NewSource(7))
		for it := 0; it < iters; it++ {
			a, b := newRhEnv(t, fx), newRhEnv(t, fx)
			names := sameSlot(3)
			k := 1 + rng.Intn(3)
			skus := make([]rhSKU, k)
			for j := range skus {
				hold := []int64{60000, 120000, 90000}[rng.Intn(3)]
				maxh := []int64{0, hold, 3 * hold, 2 * hold}[rng.Intn(4)]
				lim := int64(0)
				if rng.Intn(2) == 0 {
					lim = int64(1 + rng.Intn(3))
				}
				skus[j] = rhSKU{name: names[j], avail: int64(rng.Intn(7)), limit: lim, hold: hold, maxh: maxh}
			}
			users := []string{"", "u1", "u2", "u3"}
			mk := func(id string) rhOrder {
				o := rhOrder{id: id, user: users[rng.Intn(len(users))], qty: make([]int64, k)}
				for j := range o.qty {
					o.qty[j] = int64(1 + rng.Intn(3))
				}
				switch rng.Intn(5) {
				case 0:
					o.own = 30000
				case 1:
					o.own = 1000000
				case 2:
					o.own = 150000
				}
				return o
			}
			a.put(skus)
			b.put(skus)
			now := fx.clock.Now().UnixMilli()
			var pre []rhOrder
			for i := range rng.Intn(3) {
				pre = append(pre, mk("p"+strconv.Itoa(i)))
			}
			if len(pre) > 0 {
				ra, rb := a.general(slot, now, skus, pre), b.general(slot, now, skus, pre)
				if !reflect.DeepEqual(ra, rb) {
					t.Fatalf("setup differs: %v %v", ra, rb)
				}
			}
			n := 1 + rng.Intn(8)
			batch := make([]rhOrder, n)
			for i := range batch {
				batch[i] = mk("o" + strconv.Itoa(i))
				if len(pre) > 0 && rng.Intn(4) == 0 {
					p := pre[rng.Intn(len(pre))]
					used := false
					for _, q := range batch[:i] {
						used = used || q.id == p.id
					}
					if !used {
						if rng.Intn(2) == 0 {
							batch[i] = p // a repeat
						} else {
							batch[i].id = p.id // a conflict (mostly)
						}
					}
				}
			}
			now += int64(rng.Intn(1000))
			got := a.hot(slot, now, skus, batch)
			want := b.general(slot, now, skus, batch)
			da, db := a.dump(skus, nil), b.dump(skus, nil)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(da, db) {
				t.Fatalf("iteration %d: skus %+v\npre %+v\nbatch %+v\nhot answers     %q\ngeneral answers %q\nhot state     %v\ngeneral state %v",
					it, skus, pre, batch, got, want, da, db)
			}
		}
	})
}
