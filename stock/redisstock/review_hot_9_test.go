package redisstock_test

import (
	"reflect"
	"testing"
)

// A user's stored count the scripts did not write themselves (a fraction,
// past int64) is still read by the hot script as the general script reads
// it: as a number it keeps across the user's orders of one call, written
// in decimal once at the end. Both scripts must answer alike and leave
// identical keys.
func TestReviewHotUserCountKeptAsNumber(t *testing.T) {
	type tc struct {
		name  string
		limit int64
		count string // u1's count before the call
		qty   []int64
	}
	cases := []tc{
		// 1.5 + 1 = 2.5 <= 3, then 3.5 > 3: the second order is refused.
		{"fraction under a limit", 3, "1.5", []int64{1, 1}},
		// -2.5 + 3 = 0.5, written "0"; each order's own truncation gives "1".
		{"negative fraction", 0, "-2.5", []int64{1, 1, 1}},
		// Past int64: each order's own decimal form wraps.
		{"past int64", 0, "1e19", []int64{5000, 5000}},
	}
	eachHotMode(t, true, func(t *testing.T, fx *fixture, slot bool) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a, b := newRhEnv(t, fx), newRhEnv(t, fx)
				skus := []rhSKU{{name: "a", avail: 1 << 40, limit: c.limit, hold: 60000}}
				for _, e := range []rhEnv{a, b} {
					e.put(skus)
					if err := fx.c.HSet(fx.ctx(), e.key("a", "users"), "u1", c.count).Err(); err != nil {
						t.Fatal(err)
					}
				}
				var batch []rhOrder
				for i, q := range c.qty {
					batch = append(batch, rhOrder{id: "o" + string(rune('0'+i)), user: "u1", qty: []int64{q}})
				}
				now := fx.clock.Now().UnixMilli()
				got := a.hot(slot, now, skus, batch)
				want := b.general(slot, now, skus, batch)
				da, db := a.dump(skus, nil), b.dump(skus, nil)
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(da, db) {
					t.Fatalf("hot answers %q, general %q\nhot state     %v\ngeneral state %v", got, want, da, db)
				}
			})
		}
	})
}

// A call the hot script cannot finish (a SKU's held count that is not a
// number) fails before it writes anything, as the general script does:
// no key of the first SKU changes either.
func TestReviewHotFailedCallWritesNothing(t *testing.T) {
	eachHotMode(t, false, func(t *testing.T, fx *fixture, slot bool) {
		for _, field := range []string{"held", "ver"} {
			t.Run(field, func(t *testing.T) {
				a := newRhEnv(t, fx)
				names := sameSlot(2)
				skus := []rhSKU{{name: names[0], avail: 5, hold: 60000}, {name: names[1], avail: 5, hold: 60000}}
				a.put(skus)
				if err := fx.c.HSet(fx.ctx(), a.key(names[1], "state"), field, "x").Err(); err != nil {
					t.Fatal(err)
				}
				before := a.dump(skus, nil)
				keys, args := rhHotCall(a, slot, fx.clock.Now().UnixMilli(), skus,
					[]rhOrder{{id: "o1", user: "u1", qty: []int64{1, 1}}})
				if err := rhHot.Run(fx.ctx(), fx.c, keys, args...).Err(); err == nil {
					t.Fatal("the call succeeded on a held count that is not a number")
				}
				if after := a.dump(skus, nil); !reflect.DeepEqual(before, after) {
					t.Fatalf("a failed call wrote:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	})
}
