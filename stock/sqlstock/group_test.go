package sqlstock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
//
// A grouped Deduct answers within two Config.LockWaits: on a busy machine
// 600 callers on SQLite's one writer can outlast that, and a call then
// answers stock.ErrContention (nothing applied) or, cut during its COMMIT,
// stock.ErrUnknownOutcome. Callers retry those with the same ID, and so
// does this test, at most retries times: the answers it checks are the
// final ones.
func TestGroupConcurrentDuplicates(t *testing.T) {
	const units, ids, retries = 150, 300, 20
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: units})
			var (
				wg      sync.WaitGroup
				errs    [ids][2]error
				retried atomic.Int64
			)
			start := make(chan struct{})
			for i := range ids {
				for k := range 2 {
					wg.Go(func() {
						<-start
						o := one(fmt.Sprintf("o%d", i), "", 1)
						err := s.Deduct(context.Background(), o)
						for try := 0; try < retries && (errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome)); try++ {
							retried.Add(1)
							err = s.Deduct(context.Background(), o)
						}
						errs[i][k] = err
					})
				}
			}
			close(start)
			wg.Wait()
			if n := retried.Load(); n > 0 {
				t.Logf("%d calls retried after contention or an unknown outcome", n)
			}
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

// Callers queue while a lane is busy and go together when it frees; a
// caller whose context ends while it is queued leaves with its context's
// error and nothing sent, and the others of the group are unaffected.
func TestGroupQueuedCallerLeaves(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := groupStore(t, b, stock.Listing{SKU: "a", Units: 10})
			release := s.HoldLane("a")
			ctx, cancel := context.WithCancel(t.Context())
			left := make(chan error, 1)
			go func() { left <- s.Deduct(ctx, one("leaves", "", 1)) }()
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() { errs[i] = s.Deduct(t.Context(), one(fmt.Sprintf("o%d", i), "", 2)) })
			}
			for s.Queued("a") < 4 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-left; !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("queued caller canceled: %v, want context.Canceled alone", err)
			}
			release()
			wg.Wait()
			wantErrs(t, errs, []error{nil, nil, nil})
			wantLedger(t, s, map[string]int64{"leaves": 0, "o0": 2, "o1": 2, "o2": 2}, 4, 6)
			if s.Groups() != 1 {
				t.Errorf("%d groups written, want 1", s.Groups())
			}
		})
	}
}

// A group may mix SKUs (on SQLite all orders share one lane): each order
// is decided against its own SKUs, an unknown SKU or a missing user
// refuses only the orders that name it, and the ledger holds exactly the
// admitted orders.
func TestGroupMixedSKUs(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b.open(t), sqlstock.Config{Dialect: b.dialect})
			ctx := t.Context()
			for _, l := range []stock.Listing{{SKU: "a", Units: 5}, {SKU: "b", Units: 5}, {SKU: "c", Units: 10, PerUserLimit: 2}} {
				if err := s.PutOnSale(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			it := func(sku string, qty int64) stock.Item { return stock.Item{SKU: sku, Qty: qty} }
			orders := []stock.Order{
				{ID: "m1", Items: []stock.Item{it("a", 3)}},
				{ID: "m2", Items: []stock.Item{it("b", 2), it("a", 1)}},
				{ID: "m3", Items: []stock.Item{it("a", 2), it("b", 1)}},
				{ID: "m4", Items: []stock.Item{it("zz", 1)}},
				{ID: "m5", Items: []stock.Item{it("b", 3), it("zz", 1)}},
				{ID: "m6", Items: []stock.Item{it("b", 3)}},
				{ID: "m7", Items: []stock.Item{it("c", 1)}},
				{ID: "m8", UserID: "u1", Items: []stock.Item{it("c", 2)}},
				{ID: "m9", UserID: "u1", Items: []stock.Item{it("a", 1), it("c", 1)}},
				{ID: "m10", UserID: "u1", Items: []stock.Item{it("a", 1)}},
			}
			wantErrs(t, s.DeductGroup(ctx, orders), []error{nil, nil, stock.ErrSoldOut, stock.ErrUnknownSKU,
				stock.ErrUnknownSKU, nil, stock.ErrInvalid, nil, stock.ErrLimitReached, nil})
			took := map[string]bool{"m1": true, "m2": true, "m6": true, "m8": true, "m10": true}
			ids := make([]string, len(orders))
			for i, o := range orders {
				ids[i] = o.ID
			}
			infos, err := s.Orders(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			for i, info := range infos {
				want := orders[i]
				switch {
				case info.ID != want.ID:
					t.Fatalf("Orders gave %s in place %d, want %s", info.ID, i, want.ID)
				case !took[want.ID] && info.State != stock.StateUnknown:
					t.Errorf("%s: %+v, want none in the ledger", want.ID, info)
				case took[want.ID] && (info.State != stock.StateHeld || fmt.Sprint(info.Items) != fmt.Sprint(sorted(want.Items))):
					t.Errorf("%s: %+v, want held %v", want.ID, info, sorted(want.Items))
				}
			}
			for sku, want := range map[string][2]int64{"a": {0, 5}, "b": {0, 5}, "c": {8, 2}} {
				if lv, err := s.Levels(ctx, sku); err != nil || lv.Available != want[0] || lv.Held != want[1] {
					t.Errorf("%s: %+v, %v; want available %d, held %d", sku, lv, err, want[0], want[1])
				}
			}
		})
	}
}

func sorted(items []stock.Item) []stock.Item {
	out := slices.Clone(items)
	slices.SortFunc(out, func(x, y stock.Item) int { return strings.Compare(x.SKU, y.SKU) })
	return out
}
