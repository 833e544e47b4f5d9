package redisstock_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// bucketSale puts sku on sale in n buckets.
func (fx *fixture) bucketSale(sku string, units, perUser int64, hold time.Duration, n int) {
	fx.t.Helper()
	l := stock.Listing{SKU: sku, Units: units, PerUserLimit: perUser, HoldTTL: hold, Buckets: n}
	if err := fx.s.PutOnSale(fx.ctx(), l); err != nil {
		fx.t.Fatal(err)
	}
}

// bucketKey is the key of one bucket's gate state with suffix (":state",
// ":holds", ...), named as the Store names it.
func (fx *fixture) bucketKey(name, suffix string) string {
	return fx.cfg.Prefix + ":{" + name + "}" + suffix
}

// bucketAvail reads the avail field of each of the n buckets of sku.
func (fx *fixture) bucketAvail(sku string, n int) []int64 {
	fx.t.Helper()
	out := make([]int64, n)
	for i, name := range redisstock.BucketNames(sku, n) {
		v, err := fx.c.HGet(fx.ctx(), fx.bucketKey(name, ":state"), "avail").Int64()
		if err != nil {
			fx.t.Fatalf("bucket %q: %v", name, err)
		}
		out[i] = v
	}
	return out
}

// usersIn returns k user IDs whose orders go to bucket home of n.
func usersIn(n, home, k int, tag string) []string {
	var out []string
	for i := 0; len(out) < k; i++ {
		u := tag + "-" + strconv.Itoa(i)
		if redisstock.BucketHome(n, u, "") == home {
			out = append(out, u)
		}
	}
	return out
}

// noBucketName fails t when err names one of the buckets of sku (other
// than the SKU itself), in a *stock.SKUError or in its text.
func noBucketName(t *testing.T, err error, sku string, n int, what string) {
	t.Helper()
	if err == nil {
		return
	}
	var se *stock.SKUError
	if errors.As(err, &se) && strings.ContainsRune(se.SKU, ' ') {
		t.Errorf("%s: error %v names bucket %q", what, err, se.SKU)
	}
	for _, name := range redisstock.BucketNames(sku, n)[1:] {
		if strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %q names bucket %q", what, err, name)
		}
	}
}

// sale is what sellOut saw.
type sale struct {
	taken  int64            // units the successful Deducts took
	byUser map[string]int64 // units taken, per user
	late   int64            // Deducts that started after some Deduct had returned ErrSoldOut and still took a unit
}

// sellOut runs one goroutine per user, each Deducting 1 unit of sku under
// fresh order IDs until its first ErrSoldOut. No unit comes back during the
// sale, so once a Deduct returned ErrSoldOut no later one may succeed.
// everyBucket returns per users for each of the n buckets (usersIn),
// named from prefix and the bucket's number.
func everyBucket(n, per int, prefix string) []string {
	var users []string
	for i := range n {
		users = append(users, usersIn(n, i, per, prefix+strconv.Itoa(i))...)
	}
	return users
}

// sellsAll sells sku out to users and checks that they took every one
// of its units, none after a sold out, and that all are held.
func (fx *fixture) sellsAll(sku string, n int, units int64, users []string) {
	fx.t.Helper()
	got := fx.sellOut(sku, n, users)
	if got.taken != units || got.late != 0 {
		fx.t.Fatalf("took %d units (%d after a sold out), want %d (0)", got.taken, got.late, units)
	}
	fx.want(sku, 0, units, 0)
}

func (fx *fixture) sellOut(sku string, n int, users []string) sale {
	fx.t.Helper()
	var soldOut atomic.Bool
	var late, taken atomic.Int64
	var mu sync.Mutex
	byUser := map[string]int64{}
	var wg sync.WaitGroup
	for w, u := range users {
		wg.Go(func() {
			for k := 0; ; k++ {
				after := soldOut.Load()
				err := fx.s.Deduct(fx.ctx(), ord(fmt.Sprintf("so-%d-%d", w, k), u, it(sku, 1)))
				noBucketName(fx.t, err, sku, n, "Deduct")
				switch {
				case err == nil:
					taken.Add(1)
					if after {
						late.Add(1)
					}
					mu.Lock()
					byUser[u]++
					mu.Unlock()
				case errors.Is(err, stock.ErrSoldOut):
					soldOut.Store(true)
					return
				default:
					fx.t.Errorf("Deduct by %s: %v", u, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return sale{taken: taken.Load(), byUser: byUser, late: late.Load()}
}

// 40 users racing 10 orders each for one SKU in 3 buckets with a per-user
// limit of 3: exactly the 100 units are taken, nobody past the limit, and
// the per-user counts agree with what each user took.
func TestBucketConcurrentPerUserLimit(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, limit, users, per, n = 100, 3, 40, 10, 3
		fx.bucketSale("hot", units, limit, time.Minute, n)
		homes := map[int]bool{}
		for u := range users {
			homes[redisstock.BucketHome(n, "u"+strconv.Itoa(u), "")] = true
		}
		if len(homes) != n {
			t.Fatalf("the users go to %d of the %d buckets", len(homes), n)
		}
		var mu sync.Mutex
		perUser := make([]int64, users)
		var taken []string // order IDs that took a unit
		var bad []string   // other outcomes
		owner := map[string]int{}
		var other atomic.Int64
		var wg sync.WaitGroup
		for u := range users {
			for k := range per {
				wg.Go(func() {
					id := fmt.Sprintf("o-%d-%d", u, k)
					err := fx.s.Deduct(fx.ctx(), ord(id, "u"+strconv.Itoa(u), it("hot", 1)))
					noBucketName(t, err, "hot", n, "Deduct")
					switch {
					case err == nil:
						mu.Lock()
						perUser[u]++
						taken = append(taken, id)
						owner[id] = u
						mu.Unlock()
					case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrLimitReached):
						other.Add(1)
					default:
						mu.Lock()
						bad = append(bad, id+": "+err.Error())
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("%d of %d Deducts (%d took a unit) failed with neither sold out nor limit reached, e.g.\n%s",
				len(bad), users*per, len(taken), strings.Join(bad[:min(3, len(bad))], "\n"))
		}
		if len(taken) != units || other.Load() != users*per-units {
			t.Fatalf("%d Deducts took a unit and %d were refused, want %d and %d", len(taken), other.Load(), units, users*per-units)
		}
		for u := range users {
			if perUser[u] > limit {
				t.Fatalf("user u%d took %d, past the limit %d", u, perUser[u], limit)
			}
			got, err := fx.s.UserUnits(fx.ctx(), "hot", "u"+strconv.Itoa(u))
			if err != nil || got != perUser[u] {
				t.Fatalf("UserUnits(u%d) = %d, %v; the user took %d", u, got, err, perUser[u])
			}
		}
		fx.want("hot", 0, units, 0)

		reverted := make([]int64, users)
		for _, id := range taken[:10] {
			is(t, fx.s.Revert(fx.ctx(), id), nil, "Revert "+id)
			reverted[owner[id]]++
		}
		for _, id := range taken[10:] {
			is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm "+id)
		}
		fx.want("hot", 10, 0, units-10)
		for u := range users {
			got, err := fx.s.UserUnits(fx.ctx(), "hot", "u"+strconv.Itoa(u))
			if want := perUser[u] - reverted[u]; err != nil || got != want {
				t.Fatalf("UserUnits(u%d) after the reverts = %d, %v; want %d", u, got, err, want)
			}
		}
	})
}

// 30 buyers, each on its own user, buying one unit at a time until their
// first ErrSoldOut: every unit is sold, and none after a sold out.
func TestBucketSoldOutSellsEveryUnit(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		users := make([]string, 30)
		for i := range users {
			users[i] = "buyer-" + strconv.Itoa(i)
		}
		got := fx.sellOut("hot", n, users)
		if got.taken != units || got.late != 0 {
			t.Fatalf("took %d units (%d after a sold out), want %d (0)", got.taken, got.late, units)
		}
		fx.want("hot", 0, units, 0)
		if av, err := fx.s.Available(fx.ctx(), "hot"); err != nil || av != 0 {
			t.Fatalf("Available = %d, %v; want 0", av, err)
		}
	})
}

// Every order from one user goes to one bucket; the refills still bring it
// the other buckets' units, so the whole stock sells, one after another
// and concurrently.
func TestBucketSkewedSellsEveryUnit(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, n = 90, 3
		fx.bucketSale("seq", units, 0, time.Minute, n)
		var taken int64
		for k := 0; ; k++ {
			err := fx.s.Deduct(fx.ctx(), ord("seq-"+strconv.Itoa(k), "whale", it("seq", 1)))
			noBucketName(t, err, "seq", n, "Deduct")
			if errors.Is(err, stock.ErrSoldOut) {
				break
			}
			is(t, err, nil, "Deduct")
			taken++
		}
		if taken != units {
			t.Fatalf("one user took %d units, want %d", taken, units)
		}
		fx.want("seq", 0, units, 0)

		fx.bucketSale("par", units, 0, time.Minute, n)
		got := fx.sellOut("par", n, []string{"whale", "whale", "whale", "whale", "whale", "whale", "whale", "whale"})
		if got.taken != units || got.late != 0 {
			t.Fatalf("8 buyers on one user took %d units (%d after a sold out), want %d (0)", got.taken, got.late, units)
		}
		fx.want("par", 0, units, 0)
	})
}

// A refill that died after taking units out of a bucket: the units stay
// counted (in transit) and the sale still sells every unit exactly once.
func TestBucketRefillDiedAfterOut(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		got, err := fx.s.BucketOut(fx.ctx(), "hot", n, 1, 2, "dead.1", 10)
		if err != nil || got != 10 {
			t.Fatalf("out = %d, %v; want 10", got, err)
		}
		if av := fx.bucketAvail("hot", n); av[0] != 30 || av[1] != 20 || av[2] != 30 {
			t.Fatalf("bucket avail = %v after the out step, want [30 20 30]", av)
		}
		fx.want("hot", units, 0, 0) // the 10 on their way still count
		// A buyer of bucket 2 (where the units were going) sells out its
		// bucket's 30, then needs them.
		buyer := usersIn(n, 2, 1, "b2")[0]
		var taken int64
		for k := 0; ; k++ {
			err := fx.s.Deduct(fx.ctx(), ord("seq-"+strconv.Itoa(k), buyer, it("hot", 1)))
			noBucketName(t, err, "hot", n, "Deduct")
			if errors.Is(err, stock.ErrSoldOut) {
				break
			}
			is(t, err, nil, "Deduct")
			taken++
			if taken > units {
				t.Fatalf("sold %d of %d units", taken, units)
			}
		}
		if taken != units {
			t.Fatalf("sold %d units, want %d", taken, units)
		}
		fx.want("hot", 0, units, 0)
	})
}

// The same with the sale spread over every bucket and concurrent.
func TestBucketRefillDiedAfterOutConcurrentSale(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		if got, err := fx.s.BucketOut(fx.ctx(), "hot", n, 0, 1, "dead.0", 25); err != nil || got != 25 {
			t.Fatalf("out = %d, %v; want 25", got, err)
		}
		fx.want("hot", units, 0, 0)
		fx.sellsAll("hot", n, units, everyBucket(n, 4, "c"))
	})
}

// A refill that died after the units arrived, before clearing their
// departure record: the units are sold once, not once per end.
func TestBucketRefillDiedBeforeClear(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		got, err := fx.s.BucketOutIn(fx.ctx(), "hot", n, 1, 2, "dead.1", 10)
		if err != nil || got != 10 {
			t.Fatalf("out+in = %d, %v; want 10", got, err)
		}
		if av := fx.bucketAvail("hot", n); av[0] != 30 || av[1] != 20 || av[2] != 40 {
			t.Fatalf("bucket avail = %v after out and in, want [30 20 40]", av)
		}
		fx.sellsAll("hot", n, units, everyBucket(n, 3, "d"))
	})
}

// The bucket count of a SKU: set by its first listing, kept by a listing
// of 0, refused when it would change (from more than one, or from one).
func TestBucketCountChanges(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		fx.bucketSale("a", 90, 0, time.Minute, 3)
		if av := fx.bucketAvail("a", 3); av[0]+av[1]+av[2] != 90 || av[0] != 30 || av[1] != 30 {
			t.Fatalf("bucket avail = %v, want [30 30 30]", av)
		}
		// Buckets 0 keeps 3: the new units overwrite and are split again.
		if err := fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 61, HoldTTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		fx.want("a", 61, 0, 0)
		if av := fx.bucketAvail("a", 3); av[0]+av[1]+av[2] != 61 || max(av[0], av[1], av[2])-min(av[0], av[1], av[2]) > 1 {
			t.Fatalf("bucket avail = %v after relisting 61 units, want them split evenly", av)
		}
		// Buckets 2 on a SKU in 3: refused, nothing written.
		before := fx.dump("a", 3, 2)
		err := fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, Buckets: 2})
		is(t, err, stock.ErrInvalid, "PutOnSale from 3 buckets to 2")
		if after := fx.dump("a", 3, 2); !maps.Equal(before, after) {
			t.Fatalf("a refused count change wrote:\nbefore %v\nafter  %v", before, after)
		}
		fx.want("a", 61, 0, 0)
		// Nor Buckets 1.
		is(t, fx.s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Minute, Buckets: 1}), stock.ErrInvalid, "PutOnSale from 3 buckets to 1")
		fx.want("a", 61, 0, 0)

		// A SKU in one bucket, even with nothing held, stays in one.
		fx.bucketSale("d", 12, 0, time.Minute, 1)
		is(t, fx.s.PutOnSale(ctx, stock.Listing{SKU: "d", Units: 12, HoldTTL: time.Minute, Buckets: 3}), stock.ErrInvalid, "PutOnSale of an unsplit SKU to 3 buckets")
		fx.want("d", 12, 0, 0)
		// A new SKU is split from its first listing.
		fx.bucketSale("b", 12, 0, time.Minute, 3)
		fx.want("b", 12, 0, 0)
		if av := fx.bucketAvail("b", 3); av[0] != 4 || av[1] != 4 || av[2] != 4 {
			t.Fatalf("bucket avail = %v, want [4 4 4]", av)
		}
		// Each bucket has 4: the first two orders of 5 need a refill each.
		for i, q := range []int64{5, 5, 2} {
			u := usersIn(3, i, 1, "x")[0]
			is(t, fx.s.Deduct(ctx, ord("b-"+u, u, it("b", q))), nil, "Deduct of "+strconv.FormatInt(q, 10)+" from a bucket of 4")
		}
		fx.want("b", 0, 12, 0)
		is(t, fx.s.Deduct(ctx, ord("b-last", "x-0", it("b", 1))), stock.ErrSoldOut, "Deduct of b sold out")

		// A SKU in one bucket with a hold: refused, nothing written.
		fx.bucketSale("c", 10, 0, time.Minute, 1)
		is(t, fx.s.Deduct(ctx, ord("c-1", "u1", it("c", 2))), nil, "Deduct")
		before = fx.dump("c", 3, 1)
		is(t, fx.s.PutOnSale(ctx, stock.Listing{SKU: "c", Units: 10, HoldTTL: time.Minute, Buckets: 3}), stock.ErrInvalid, "PutOnSale of a held SKU to 3 buckets")
		if after := fx.dump("c", 3, 1); !maps.Equal(before, after) {
			t.Fatalf("a refused count change wrote:\nbefore %v\nafter  %v", before, after)
		}
		fx.want("c", 8, 2, 0)
		is(t, fx.s.Confirm(ctx, "c-1"), nil, "Confirm")
		fx.want("c", 8, 0, 2)
	})
}

// dump reads every field of the states of the buckets of sku in layouts
// of each count given (a missing state reads as nothing).
func (fx *fixture) dump(sku string, counts ...int) map[string]string {
	fx.t.Helper()
	out := map[string]string{}
	for _, n := range counts {
		for _, name := range redisstock.BucketNames(sku, n) {
			for _, suffix := range []string{":state", ":users", ":holds"} {
				key := fx.bucketKey(name, suffix)
				typ, err := fx.c.Type(fx.ctx(), key).Result()
				if err != nil {
					fx.t.Fatal(err)
				}
				switch typ {
				case "hash":
					m, err := fx.c.HGetAll(fx.ctx(), key).Result()
					if err != nil {
						fx.t.Fatal(err)
					}
					for f, v := range m {
						out[key+"/"+f] = v
					}
				case "none":
				default:
					n, err := fx.c.ZCard(fx.ctx(), key).Result()
					if err != nil {
						fx.t.Fatal(err)
					}
					out[key] = typ + ":" + strconv.FormatInt(n, 10)
				}
			}
		}
	}
	return out
}

// An order over two SKUs in 3 buckets each is all or nothing, refills
// included, and a sold out names the public SKU.
func TestBucketMultiSKUAllOrNothing(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("x", 30, 0, time.Minute, n)
		fx.bucketSale("y", 3, 0, time.Minute, n)
		// y has one unit per bucket: an order of 3 needs a refill of y.
		is(t, fx.s.Deduct(ctx, ord("o1", "u1", it("x", 2), it("y", 3))), nil, "Deduct of 3 y over 3 buckets")
		fx.want("x", 28, 2, 0)
		fx.want("y", 0, 3, 0)
		for i, u := range []string{usersIn(n, 0, 1, "m")[0], usersIn(n, 1, 1, "m")[0], usersIn(n, 2, 1, "m")[0]} {
			id := "r" + strconv.Itoa(i)
			err := fx.s.Deduct(ctx, ord(id, u, it("x", 5), it("y", 1)))
			var se *stock.SKUError
			if !errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &se) || se.SKU != "y" {
				t.Fatalf("Deduct with y sold out (bucket %d): %v, want sold out naming \"y\"", i, err)
			}
			noBucketName(t, err, "y", n, "Deduct")
			noBucketName(t, err, "x", n, "Deduct")
			fx.want("x", 28, 2, 0)
			fx.want("y", 0, 3, 0)
			is(t, fx.s.Revert(ctx, id), stock.ErrUnknownOrder, "Revert of the refused order")
		}
		// x runs short in the other direction: 28 available, order 29.
		is(t, fx.s.Revert(ctx, "o1"), nil, "Revert o1")
		fx.want("x", 30, 0, 0)
		fx.want("y", 3, 0, 0)
		err := fx.s.Deduct(ctx, ord("o2", "u2", it("x", 31), it("y", 1)))
		var se *stock.SKUError
		if !errors.Is(err, stock.ErrSoldOut) || !errors.As(err, &se) || se.SKU != "x" {
			t.Fatalf("Deduct of 31 x: %v, want sold out naming \"x\"", err)
		}
		noBucketName(t, err, "x", n, "Deduct")
		fx.want("x", 30, 0, 0)
		fx.want("y", 3, 0, 0)
		is(t, fx.s.Deduct(ctx, ord("o2", "u2", it("x", 30), it("y", 3))), nil, "Deduct of everything")
		fx.want("x", 0, 30, 0)
		fx.want("y", 0, 3, 0)
	})
}

// One bucket's data is lost: orders routed to it still succeed from the
// other buckets' units, none is sold twice, no error names the bucket.
func TestBucketLostBucketState(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		lost := redisstock.BucketNames("hot", n)[1]
		for _, suffix := range []string{":state", ":holds", ":users", ":xo", ":rb"} {
			if err := fx.c.Del(ctx, fx.bucketKey(lost, suffix)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if av, err := fx.s.Available(ctx, "hot"); err != nil || av != units-30 {
			t.Fatalf("Available = %d, %v with a bucket lost; want %d", av, err, units-30)
		}
		victims := usersIn(n, 1, 3, "lost")
		u, err := fx.s.UserUnits(ctx, "hot", victims[0])
		noBucketName(t, err, "hot", n, "UserUnits")
		if err != nil && !errors.Is(err, stock.ErrUnavailable) {
			t.Fatalf("UserUnits of a user of the lost bucket: %d, %v", u, err)
		}
		for i, v := range victims {
			err := fx.s.Deduct(ctx, ord("v"+strconv.Itoa(i), v, it("hot", 2)))
			noBucketName(t, err, "hot", n, "Deduct")
			is(t, err, nil, "Deduct routed to the lost bucket")
		}
		fx.want("hot", units-30-6, 6, 0)
		for _, v := range victims {
			got, err := fx.s.UserUnits(ctx, "hot", v)
			noBucketName(t, err, "hot", n, "UserUnits")
			if err != nil || got != 2 {
				t.Fatalf("UserUnits(%s) = %d, %v; want 2", v, got, err)
			}
		}
		sold := fx.sellOut("hot", n, everyBucket(n, 3, "s"))
		if sold.taken > units-30-6 {
			t.Fatalf("sold %d more units, but only %d were left: a unit was sold twice", sold.taken, units-30-6)
		}
		if sold.taken != units-30-6 || sold.late != 0 {
			t.Fatalf("sold %d more units (%d after a sold out), want %d (0)", sold.taken, sold.late, units-30-6)
		}
		fx.want("hot", 0, units-30, 0)
		hs, err := fx.s.HeldOrders(ctx, "hot")
		if err != nil || len(hs) != int(units-30-6)+len(victims) {
			t.Fatalf("HeldOrders = %d holds, %v; want %d", len(hs), err, units-30-6+len(victims))
		}
	})
}

// Orders, HeldOrders, ReclaimExpired, UserUnits and RevertItems name the
// public SKU of bucketed lines.
func TestBucketReadsNamePublicSKU(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("p", 9, 0, time.Minute, n)
		fx.sale("plain", 20, 0, time.Minute)
		var ids, users []string
		qty := map[string]int64{}
		for b := range n {
			for j, u := range usersIn(n, b, 2, "pub"+strconv.Itoa(b)) {
				id := fmt.Sprintf("p-%d-%d", b, j)
				q := [][]int64{{1, 4}, {1, 1}, {1, 1}}[b][j] // bucket 0's 3 units need a refill
				is(t, fx.s.Deduct(ctx, ord(id, u, it("p", q), it("plain", 1))), nil, "Deduct "+id)
				ids, users = append(ids, id), append(users, u)
				qty[id] = q
			}
		}
		fx.want("p", 0, 9, 0)
		infos, err := fx.s.Orders(ctx, ids)
		if err != nil || len(infos) != len(ids) {
			t.Fatalf("Orders = %+v, %v", infos, err)
		}
		for i, info := range infos {
			want := []stock.Item{it("p", qty[ids[i]]), it("plain", 1)}
			if info.ID != ids[i] || info.UserID != users[i] || info.State != stock.StateHeld || !slices.Equal(info.Items, want) {
				t.Fatalf("Orders[%d] = %+v, want %s of %s holding %v", i, info, ids[i], users[i], want)
			}
		}
		for i, u := range users {
			got, err := fx.s.UserUnits(ctx, "p", u)
			if err != nil || got != qty[ids[i]] {
				t.Fatalf("UserUnits(p, %s) = %d, %v; want %d", u, got, err, qty[ids[i]])
			}
		}
		hs, err := fx.s.HeldOrders(ctx, "p")
		if err != nil || len(hs) != len(ids) {
			t.Fatalf("HeldOrders = %+v, %v; want %d holds", hs, err, len(ids))
		}
		var sum int64
		for _, h := range hs {
			if h.SKU != "p" || qty[h.OrderID] != h.Qty {
				t.Fatalf("HeldOrders hold %+v, want SKU p, Qty %d", h, qty[h.OrderID])
			}
			sum += h.Qty
		}
		if sum != 9 {
			t.Fatalf("HeldOrders hold %d units, want 9", sum)
		}
		// A partial return of a bucketed line.
		is(t, fx.s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "p-0-1", Items: []stock.Item{it("p", 1)}}), nil, "RevertItems")
		fx.want("p", 1, 8, 0)
		infos, err = fx.s.Orders(ctx, []string{"p-0-1"})
		if err != nil || len(infos) != 1 || !slices.Equal(infos[0].Returned, []stock.Item{it("p", 1)}) {
			t.Fatalf("Orders(p-0-1) = %+v, %v; want p 1 returned", infos, err)
		}
		fx.clock.Advance(time.Minute)
		var got []stock.Reclaimed
		for {
			r, err := fx.s.ReclaimExpired(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(r) == 0 {
				break
			}
			got = append(got, r...)
		}
		var pUnits, plainUnits int64
		for _, r := range got {
			switch r.SKU {
			case "p":
				pUnits += r.Qty
			case "plain":
				plainUnits += r.Qty
			default:
				t.Fatalf("ReclaimExpired returned %+v, naming neither p nor plain", r)
			}
		}
		if pUnits != 8 || plainUnits != int64(len(ids)) {
			t.Fatalf("ReclaimExpired returned %d of p and %d of plain, want 8 and %d: %+v", pUnits, plainUnits, len(ids), got)
		}
		fx.want("p", 9, 0, 0)
		fx.want("plain", 20, 0, 0)
	})
}

// A refill whose chosen donor sells out under it, while another bucket
// still has units: the order must not be told sold out, since the SKU
// has units left.
func TestBucketSoldOutOnlyWhenEveryBucketIsEmpty(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hot", 39, 0, time.Minute, n) // 13 per bucket
		home, a, b := usersIn(n, 0, 1, "h")[0], usersIn(n, 1, 1, "a")[0], usersIn(n, 2, 1, "b")[0]
		is(t, fx.s.Deduct(ctx, ord("h-0", home, it("hot", 13))), nil, "Deduct of bucket 0's units")
		is(t, fx.s.Deduct(ctx, ord("b-0", b, it("hot", 10))), nil, "Deduct of 10 of bucket 2's units")
		if av := fx.bucketAvail("hot", n); av[0] != 0 || av[1] != 13 || av[2] != 3 {
			t.Fatalf("bucket avail = %v, want [0 13 3]", av)
		}
		// The refill for bucket 0 plans to take from bucket 1 (the
		// fullest); a buyer of bucket 1 takes all 13 first.
		var drained error
		hook := &onceBefore{hash: redisstock.BucketOutScriptHash(), f: func() { drained = fx.s.Deduct(ctx, ord("a-0", a, it("hot", 13))) }}
		fx.loadScripts()
		fx.c.AddHook(checkHook(hook.check))
		err := fx.s.Deduct(ctx, ord("h-1", home, it("hot", 1)))
		is(t, drained, nil, "Deduct draining bucket 1 during the refill")
		if av := fx.bucketAvail("hot", n); err != nil {
			t.Fatalf("Deduct of 1 while bucket 2 still had 3: %v (bucket avail now %v)", err, av)
		}
		fx.want("hot", 2, 37, 0)
	})
}
