package redisstock_test

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/keyslot"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// ageKeys lets d pass for the keys' lifetimes (TTLs): miniredis moves its
// clock, a real server is waited for.
func (fx *fixture) ageKeys(d time.Duration) {
	if fx.mini != nil {
		fx.mini.FastForward(d)
		return
	}
	time.Sleep(d)
}

// Promise broken: no oversell (invariant 1) and "every unit counts once,
// whatever step a refill stopped at" (doc.go, # Buckets).
//
// A refill that died after its units arrived (stock_bucket_in.lua wrote
// the 'in' marker and added them to the destination) but before
// stock_bucket_clear.lua removed the departure record leaves a departure
// record with no TTL and an arrival marker that lives only the Store's
// Retention. When no refill of the SKU runs within Retention (a sale whose
// buckets stay even), the marker expires while the record stays: the next
// refill's settle runs stock_bucket_in.lua again, finds no marker, and adds
// the units to the destination a second time. Sequence: 90 units in 3
// buckets; out+in of 10 from bucket 1 to bucket 2, no clear; Retention
// passes; the sale sells 100 units. (Retention is MinRetention here only
// to keep the wait short: with the default 24h the same happens a day on.)
func TestReview3aArrivalMarkerExpiresBeforeClear(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		cfg := fx.cfg
		cfg.Retention = redisstock.MinRetention
		fx.s = newStore(t, fx.c, cfg)
		const units, n = 90, 3
		fx.bucketSale("hot", units, 0, time.Minute, n)
		if got, err := fx.s.BucketOutIn(fx.ctx(), "hot", n, 1, 2, "dead.1", 10); err != nil || got != 10 {
			t.Fatalf("out+in = %d, %v; want 10", got, err)
		}
		fx.want("hot", units, 0, 0)
		fx.ageKeys(2 * redisstock.MinRetention)
		sold := fx.sellOut("hot", n, everyBucket(n, 3, "m"))
		if sold.taken != units {
			t.Fatalf("the sale took %d units of %d put on sale", sold.taken, units)
		}
	})
}

// nthCall runs f once, before the n-th command (alone or in a pipeline)
// that calls the script whose SHA1 is hash.
type nthCall struct {
	hash string
	n    atomic.Int64
	at   int64
	f    func()
}

func (h *nthCall) check(cmds []redis.Cmder) {
	for _, c := range cmds {
		for _, a := range c.Args() {
			if s, _ := a.(string); s == h.hash {
				if h.n.Add(1) == h.at {
					h.f()
				}
				return
			}
		}
	}
}

// Promise broken: "a plain error means nothing is held" (deductSlots;
// invariant 3, and the rule that a business error leaves nothing held).
//
// deductBuckets tries a bucketed order again after each refill, with a
// new attempt, and answers the last attempt's error only: the failure of
// an earlier attempt's undo (joined to its sold out as an unknown outcome)
// is dropped. A later attempt counts on the lines the earlier one left
// held, and its own undo takes only its own token off them, so they stay
// held under the first attempt's token while the caller is told, for
// certain, ErrSoldOut.
// Sequence: SKU hx in 3 buckets of 1 unit, plain SKU p on a lower slot;
// user U's bucket 0 is emptied by V. U orders {hx 1, p 1}: attempt 1
// takes p, hx's bucket refuses (sold out), the undo of p fails before it
// is sent (the error is an unknown outcome); the refill moves buckets 1
// and 2's units to bucket 0; W takes them before the order is tried
// again; attempt 2 counts on p's hold, hx is refused, its undo leaves p
// (attempt 1 still counts on it), the refill proves hx sold out. Deduct
// answers "stock: sold out: SKU hx" with p's unit held by the order.
func TestReview3aSoldOutAfterRefillLeavesEarlierAttemptHeld(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		ctx := fx.ctx()
		const n = 3
		fx.bucketSale("hx", 3, 0, time.Minute, n) // 1 per bucket
		p := ""
		for i := 0; ; i++ {
			if p = "p" + strconv.Itoa(i); keyslot.Slot(p) < keyslot.Slot("hx") {
				break
			}
		}
		fx.sale(p, 10, 0, time.Minute)
		us := usersIn(n, 0, 3, "u") // all in bucket 0, the SKU's own state
		u, v, w := us[0], us[1], us[2]
		// Load every script the order's path runs.
		is(t, fx.s.Deduct(ctx, ord("warm", v, it("hx", 1), it(p, 1))), nil, "warm-up Deduct")
		is(t, fx.s.Revert(ctx, "warm"), nil, "warm-up Revert")
		is(t, fx.s.Deduct(ctx, ord("v-0", v, it("hx", 1))), nil, "Deduct of bucket 0's unit")
		// U's refill brings bucket 0 the 2 units of buckets 1 and 2; W
		// takes them before U's order is tried again.
		var drained error
		fx.loadScripts()
		fx.c.AddHook(checkHook((&nthCall{hash: redisstock.BucketLeaseScriptHash(), at: 3, f: func() {
			drained = fx.s.Deduct(ctx, ord("w-0", w, it("hx", 2)))
		}}).check))
		// U's first attempt: p's group (the lower slot) is taken, hx's
		// refused; the undo of p never leaves the client.
		fx.hook.arm(2, 1, true)
		err := fx.s.Deduct(ctx, ord("o", u, it("hx", 1), it(p, 1)))
		is(t, drained, nil, "W's Deduct during the refill")
		lv, lerr := fx.s.Levels(ctx, p)
		if lerr != nil {
			t.Fatal(lerr)
		}
		t.Logf("Deduct: %v; %s levels %+v", err, p, lv)
		if err != nil && !errors.Is(err, stock.ErrUnknownOutcome) && lv.Held != 0 {
			t.Fatalf("Deduct answered %v (nothing held, for certain) while %s holds %d unit(s) of the order", err, p, lv.Held)
		}
	})
}
