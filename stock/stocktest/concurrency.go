package stocktest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// Exact counts under concurrency.
func init() {
	register("ConcurrentBuyersSellExactlyTheStock", func(e *env) {
		const (
			units = 1000
			users = 500
			limit = 4
		)
		e.sale("hot", units, limit, 0)
		var (
			wg    sync.WaitGroup
			taken atomic.Int64
			bad   atomic.Int64
			per   [users]int64
		)
		for u := range users {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(u), 7))
				q := int64(0)
				for n := 0; per[u] < limit; n++ {
					if q == 0 {
						q = min(1+rng.Int64N(3), limit-per[u])
					}
					err := e.deductR(order(oid("u"+oid("", u), n), oid("u", u), item("hot", q)))
					switch {
					case err == nil:
						per[u] += q
						taken.Add(q)
						q = 0
					case errors.Is(err, stock.ErrSoldOut) && q > 1:
						q = 1 // try a smaller order
					case errors.Is(err, stock.ErrSoldOut):
						return
					default:
						bad.Add(1)
						e.t.Errorf("user %d: Deduct: %v", u, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if bad.Load() > 0 {
			e.t.FailNow()
		}
		if got := taken.Load(); got != units {
			e.t.Fatalf("buyers took %d units of %d", got, units)
		}
		e.want("hot", 0, units, 0)
		// Nobody holds past the limit: a user who reached it is refused
		// even after a restock.
		e.is(e.m.Restock(e.ctx(), stock.Restock{OpID: "op-8", SKU: "hot", Units: users * limit}), nil, "Restock")
		for u := range users {
			if per[u] == limit {
				err := e.deduct(order(oid("extra", u), oid("u", u), item("hot", 1)))
				e.is(err, stock.ErrLimitReached, "Deduct past the limit")
			}
		}
	})

	register("SameUserRacesItsLimit", func(e *env) {
		e.sale("a", 100, 5, 0)
		var (
			wg sync.WaitGroup
			ok atomic.Int64
		)
		for i := range 40 {
			wg.Go(func() {
				err := e.deductR(order(oid("o", i), "u1", item("a", 1)))
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, stock.ErrLimitReached):
					e.t.Errorf("Deduct: %v", err)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 5 {
			e.t.Fatalf("%d orders of one user succeeded, want exactly 5", ok.Load())
		}
		e.want("a", 95, 5, 0)
	})

	register("SameOrderRacesTakesAndReturnsOnce", func(e *env) {
		e.sale("a", 100, 0, 0)
		e.sale("b", 100, 0, 0)
		o := order("o1", "u1", item("a", 3), item("b", 2))
		race := func(call func() error) {
			var wg sync.WaitGroup
			for range 40 {
				wg.Go(func() {
					if err := call(); err != nil {
						e.t.Errorf("racing call: %v", err)
					}
				})
			}
			wg.Wait()
		}
		race(func() error { return e.deductR(o) })
		e.want("a", 97, 3, 0)
		e.want("b", 98, 2, 0)
		race(func() error { return e.revertR("o1") })
		e.want("a", 100, 0, 0)
		e.want("b", 100, 0, 0)
	})

	register("MixedTrafficKeepsTheBooks", mixedTraffic)
}

// mixedTraffic runs deducts, confirms, reverts and reclaims from several
// goroutines while the clock moves, then checks that every unit is
// accounted for: on sale == available + held + sold, and sold is exactly
// what the confirmed, unrefunded orders took.
func mixedTraffic(e *env) {
	const (
		workers = 8
		ops     = 60
	)
	skus := []string{"a", "b"}
	onSale := map[string]int64{"a": 150, "b": 60}
	for _, s := range skus {
		e.sale(s, onSale[s], 0, time.Minute)
	}
	type placed struct {
		o         stock.Order
		confirmed bool
		closed    bool
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		all     []*placed
		clockMu sync.Mutex
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			var mine []*placed
			for i := range ops {
				switch r := rng.IntN(10); {
				case r < 5 || len(mine) == 0:
					o := order(oid(oid("w", w), i), "", item(skus[rng.IntN(2)], 1+rng.Int64N(2)))
					if rng.IntN(3) == 0 {
						o.Items = []stock.Item{item("a", 1), item("b", 1)}
					}
					err := e.deductR(o)
					if err == nil {
						mine = append(mine, &placed{o: o})
					} else if !errors.Is(err, stock.ErrSoldOut) {
						e.t.Errorf("Deduct: %v", err)
					}
				case r < 7:
					p := mine[rng.IntN(len(mine))]
					err := e.confirmR(p.o.ID)
					switch {
					case err == nil:
						p.confirmed = true
					case errors.Is(err, stock.ErrHoldExpired):
						p.closed = true
					case errors.Is(err, stock.ErrOrderClosed) && p.closed:
					default:
						e.t.Errorf("Confirm: %v", err)
					}
				case r < 8:
					p := mine[rng.IntN(len(mine))]
					if err := e.revertR(p.o.ID); err != nil {
						e.t.Errorf("Revert: %v", err)
					}
					p.closed = true
				case r < 9:
					if _, err := e.reclaimR(3); err != nil {
						e.t.Errorf("ReclaimExpired: %v", err)
					}
				default:
					clockMu.Lock()
					e.clock.Advance(15 * time.Second)
					clockMu.Unlock()
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	e.clock.Advance(time.Hour)
	e.reclaimAll()
	sold := map[string]int64{}
	for _, p := range all {
		if p.confirmed && !p.closed {
			for _, it := range p.o.Items {
				sold[it.SKU] += it.Qty
			}
		}
	}
	for _, s := range skus {
		e.want(s, onSale[s]-sold[s], 0, sold[s])
	}
}
