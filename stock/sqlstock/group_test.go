package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// one is an order of qty units of SKU "a".
func one(id, user string, qty int64) stock.Order {
	return stock.Order{ID: id, UserID: user, Items: []stock.Item{{SKU: "a", Qty: qty}}}
}

// wantErrs fails the test unless each errs[i] matches want[i] (nil for
// success).
func wantErrs(t *testing.T, errs []error, want []error) {
	t.Helper()
	for i := range want {
		if (want[i] == nil) != (errs[i] == nil) || (want[i] != nil && !errors.Is(errs[i], want[i])) {
			t.Errorf("order %d: %v, want %v", i, errs[i], want[i])
		}
	}
}

// wantLedger fails the test unless each order of want is in the ledger
// with exactly its state and quantity of SKU "a" (qty 0: not in the
// ledger), and SKU "a" has the levels given.
func wantLedger(t *testing.T, s *sqlstock.Store, want map[string]int64, avail, held int64) {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	infos, err := s.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range infos {
		qty := want[o.ID]
		switch {
		case qty == 0 && o.State != stock.StateUnknown:
			t.Errorf("order %s: %+v, want none in the ledger", o.ID, o)
		case qty > 0 && (o.State != stock.StateHeld || len(o.Items) != 1 || o.Items[0] != stock.Item{SKU: "a", Qty: qty}):
			t.Errorf("order %s: %+v, want held, %d of a", o.ID, o, qty)
		}
	}
	if lv, err := s.Levels(ctx, "a"); err != nil || lv.Available != avail || lv.Held != held {
		t.Errorf("levels %+v, %v; want available %d, held %d", lv, err, avail, held)
	}
}

// groupStore is an Atomic Store with grouping on (the default) over b.
func groupStore(t *testing.T, b backend, l stock.Listing) *sqlstock.Store {
	s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect})
	if err := s.PutOnSale(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	return s
}

// When a group's sum does not fit, orders are admitted in arrival order,
// each against what the ones before it took: a big order that does not
// fit never stops a smaller one after it.
func TestGroupAdmitsInArrivalOrder(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: 5})
			errs := s.DeductGroup(t.Context(), []stock.Order{
				one("o1", "", 3), one("o2", "", 3), one("o3", "", 2), one("o4", "", 1), one("o5", "", 1)})
			wantErrs(t, errs, []error{nil, stock.ErrSoldOut, nil, stock.ErrSoldOut, stock.ErrSoldOut})
			wantLedger(t, s, map[string]int64{"o1": 3, "o2": 0, "o3": 2, "o4": 0, "o5": 0}, 0, 5)
			if s.Groups() != 1 {
				t.Errorf("%d groups written, want 1", s.Groups())
			}
		})
	}
}

// An order ID twice in one group takes once; the second gets the repeat
// answer (nil for the same order, ErrConflict for other items), and
// retries across groups answer from the ledger without failing the
// others of their group.
func TestGroupDuplicates(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: 100})
			ctx := t.Context()
			errs := s.DeductGroup(ctx, []stock.Order{one("o1", "", 2), one("o1", "", 2), one("o1", "", 3), one("o2", "", 1)})
			wantErrs(t, errs, []error{nil, nil, stock.ErrConflict, nil})
			wantLedger(t, s, map[string]int64{"o1": 2, "o2": 1}, 97, 3)
			// Across groups: a retry of a committed order, the same ID with
			// other items, and new orders beside them.
			errs = s.DeductGroup(ctx, []stock.Order{one("o3", "", 4), one("o1", "", 2), one("o2", "", 5), one("o4", "", 1)})
			wantErrs(t, errs, []error{nil, nil, stock.ErrConflict, nil})
			wantLedger(t, s, map[string]int64{"o1": 2, "o2": 1, "o3": 4, "o4": 1}, 92, 8)
		})
	}
}

// Per-user limits are exact within a group: each order is counted
// against what the user held before the group and what the user's
// earlier orders in the group took; an order without a user of a limited
// SKU is refused alone.
func TestGroupUserLimits(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: 100, PerUserLimit: 3})
			ctx := t.Context()
			if err := s.Deduct(ctx, one("before", "u3", 2)); err != nil {
				t.Fatal(err)
			}
			errs := s.DeductGroup(ctx, []stock.Order{
				one("o1", "u1", 2), one("o2", "u1", 2), one("o3", "u2", 3), one("o4", "u1", 1),
				one("o5", "u2", 1), one("o6", "u3", 1), one("o7", "u3", 1), one("o8", "", 1)})
			wantErrs(t, errs, []error{nil, stock.ErrLimitReached, nil, nil,
				stock.ErrLimitReached, nil, stock.ErrLimitReached, stock.ErrInvalid})
			wantLedger(t, s, map[string]int64{"before": 2, "o1": 2, "o2": 0, "o3": 3, "o4": 1,
				"o5": 0, "o6": 1, "o7": 0, "o8": 0}, 91, 9)
		})
	}
}

// A group whose COMMIT reply is lost leaves every order resolvable by its
// own ID: the Store re-runs each and the ledger answers (nil, exactly one
// take each); with the network down the re-runs fail too, every caller
// gets ErrUnknownOutcome alone, and the caller's retry settles each.
func TestGroupLostCommit(t *testing.T) {
	for _, b := range serverBackends() {
		for _, limit := range []int64{0, 10} { // the first try; the locked rows
			t.Run(fmt.Sprintf("%s/limit=%d", b.name, limit), func(t *testing.T) {
				db, f := openFlaky(t, b)
				s := newStore(t, db, sqlstock.Config{Dialect: b.dialect, RetryWait: time.Millisecond})
				t.Cleanup(func() { f.down.Store(false) })
				ctx := t.Context()
				if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100, PerUserLimit: limit}); err != nil {
					t.Fatal(err)
				}
				group := func(prefix string) []stock.Order {
					var os []stock.Order
					for i := range 5 {
						os = append(os, one(fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("u%d", i), 1))
					}
					return os
				}
				want := map[string]int64{}
				for _, fault := range []int32{faultAfterCommit, faultBeforeCommit} {
					prefix := fmt.Sprintf("f%d-", fault)
					f.fault.Store(fault)
					for i, err := range s.DeductGroup(ctx, group(prefix)) {
						if err != nil {
							t.Fatalf("fault %d, order %d: %v", fault, i, err)
						}
					}
					if f.fault.Load() != faultNone {
						t.Fatalf("fault %d never hit", fault)
					}
					for _, o := range group(prefix) {
						want[o.ID] = 1
					}
				}
				wantLedger(t, s, want, 90, 10)

				f.downOnFault.Store(true)
				f.fault.Store(faultAfterCommit)
				orders := group("down-")
				for i, err := range s.DeductGroup(ctx, orders) {
					unknownOnly(t, fmt.Sprintf("order %d, network down", i), err)
				}
				f.down.Store(false)
				for _, o := range orders {
					if err := s.Deduct(ctx, o); err != nil {
						t.Fatalf("retry of %s: %v", o.ID, err)
					}
					want[o.ID] = 1
				}
				wantLedger(t, s, want, 85, 15)
			})
		}
	}
}

// Many callers on one hot SKU, every order ID sent twice at once: exactly
// the units on sale are taken, each by one order, both calls of an ID get
// the same answer, and the Store did write groups.
func TestGroupConcurrentDuplicates(t *testing.T) {
	const units, ids = 150, 300
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: units})
			var (
				wg   sync.WaitGroup
				errs [ids][2]error
			)
			start := make(chan struct{})
			for i := range ids {
				for k := range 2 {
					wg.Go(func() {
						<-start
						errs[i][k] = s.Deduct(context.Background(), one(fmt.Sprintf("o%d", i), "", 1))
					})
				}
			}
			close(start)
			wg.Wait()
			took := 0
			want := map[string]int64{}
			for i, e := range errs {
				switch {
				case e[0] == nil && e[1] == nil:
					took++
					want[fmt.Sprintf("o%d", i)] = 1
				case errors.Is(e[0], stock.ErrSoldOut) && errors.Is(e[1], stock.ErrSoldOut):
					want[fmt.Sprintf("o%d", i)] = 0
				default:
					t.Fatalf("order o%d: %v and %v", i, e[0], e[1])
				}
			}
			if took != units {
				t.Errorf("%d orders took, want %d", took, units)
			}
			wantLedger(t, s, want, 0, units)
			if s.Groups() == 0 {
				t.Errorf("no group was written")
			}
		})
	}
}
