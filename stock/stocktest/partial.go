package stocktest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// partial returns the backend's stock.PartialReverter, or nil after
// logging that it has none (the suite then has nothing to check).
func (e *env) partial() stock.PartialReverter {
	pr, ok := e.m.(stock.PartialReverter)
	if !ok {
		e.t.Logf("%T does not implement stock.PartialReverter; nothing to check", e.m)
	}
	return pr
}

func ret(op, orderID string, items ...stock.Item) stock.Return {
	return stock.Return{OpID: op, OrderID: orderID, Items: items}
}

// userUnits returns what UserUnits reports, or -1 when the backend is no
// stock.OrderReader.
func (e *env) userUnits(sku, user string) int64 {
	e.t.Helper()
	rd, ok := e.m.(stock.OrderReader)
	if !ok {
		return -1
	}
	n, err := rd.UserUnits(e.ctx(), sku, user)
	if err != nil {
		e.t.Fatalf("UserUnits(%s, %s): %v", sku, user, err)
	}
	return n
}

// wantUser checks a user's units of a SKU where the backend reports them.
func (e *env) wantUser(sku, user string, want int64) {
	e.t.Helper()
	if n := e.userUnits(sku, user); n >= 0 && n != want {
		e.t.Fatalf("UserUnits(%s, %s) = %d, want %d", sku, user, n, want)
	}
}

// info returns what OrderReader reports of one order, and false when the
// backend is no stock.OrderReader.
func (e *env) info(id string) (stock.OrderInfo, bool) {
	e.t.Helper()
	rd, ok := e.m.(stock.OrderReader)
	if !ok {
		return stock.OrderInfo{}, false
	}
	got, err := rd.Orders(e.ctx(), []string{id})
	if err != nil || len(got) != 1 {
		e.t.Fatalf("Orders(%s) = %+v, %v", id, got, err)
	}
	return got[0], true
}

func itemsString(items []stock.Item) string { return fmt.Sprint(items) }

// Partial reverts give back part of an order exactly once per operation ID,
// never more than the order took, with the quota, leaving the rest of the
// order in its state.
func init() {
	register("PartialRevertOfAHeldOrder", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		e.sale("a", 10, 5, time.Minute)
		e.sale("b", 10, 0, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 3), item("b", 2)))
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 1))), nil, "RevertItems")
		e.want("a", 8, 2, 0)
		e.want("b", 8, 2, 0)
		e.wantUser("a", "u1", 2)
		// A repeat changes nothing; the same operation with other items is a
		// conflict.
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 1))), nil, "RevertItems repeated")
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 2))), stock.ErrConflict, "RevertItems reusing the operation ID")
		e.want("a", 8, 2, 0)
		// Never more than the line still has, never a SKU the order lacks,
		// and all lines or none.
		err := pr.RevertItems(e.ctx(), ret("r2", "o1", item("a", 3)))
		e.is(err, stock.ErrExceedsOrder, "RevertItems past what the line has")
		var se *stock.SKUError
		if !errors.As(err, &se) || se.SKU != "a" {
			e.t.Fatalf("RevertItems past the line: %v, want a *stock.SKUError naming a", err)
		}
		e.sale("c", 10, 0, time.Minute)
		e.is(pr.RevertItems(e.ctx(), ret("r3", "o1", item("c", 1))), stock.ErrExceedsOrder, "RevertItems of a SKU not in the order")
		e.is(pr.RevertItems(e.ctx(), ret("r4", "o1", item("a", 1), item("b", 3))), stock.ErrExceedsOrder, "RevertItems with one line too many")
		e.want("a", 8, 2, 0)
		e.want("b", 8, 2, 0)
		e.want("c", 10, 0, 0)
		if in, ok := e.info("o1"); ok {
			if in.State != stock.StateHeld || itemsString(in.Items) != itemsString([]stock.Item{item("a", 3), item("b", 2)}) ||
				itemsString(in.Returned) != itemsString([]stock.Item{item("a", 1)}) {
				e.t.Fatalf("Orders(o1) = %+v, want held, items [a 3, b 2], returned [a 1]", in)
			}
		}
		// The rest of the order keeps its life: a repeat Deduct takes
		// nothing, Confirm sells what is left, Revert refunds it.
		e.mustDeduct(order("o1", "u1", item("a", 3), item("b", 2)))
		e.want("a", 8, 2, 0)
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		e.want("a", 8, 0, 2)
		e.want("b", 8, 0, 2)
		e.is(pr.RevertItems(e.ctx(), ret("r5", "o1", item("b", 1))), nil, "RevertItems of the confirmed rest")
		e.want("b", 9, 0, 1)
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert")
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
		e.wantUser("a", "u1", 0)
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert repeated")
		e.want("a", 10, 0, 0)
		e.is(pr.RevertItems(e.ctx(), ret("r6", "o1", item("a", 1))), stock.ErrOrderClosed, "RevertItems of a refunded order")
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 1))), nil, "an applied return repeated after the refund")
		e.want("a", 10, 0, 0)
	})

	register("PartialRefundsUpToTheWholeOrder", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		e.sale("a", 10, 4, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 4)))
		e.is(e.m.Confirm(e.ctx(), "o1"), nil, "Confirm")
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 1))), nil, "RevertItems")
		e.want("a", 7, 0, 3)
		e.wantUser("a", "u1", 3)
		// The quota came back in proportion: one more unit fits, two do not.
		e.is(e.deduct(order("o2", "u1", item("a", 2))), stock.ErrLimitReached, "Deduct past the returned quota")
		e.is(pr.RevertItems(e.ctx(), ret("r2", "o1", item("a", 3))), nil, "RevertItems of the rest")
		e.want("a", 10, 0, 0)
		e.wantUser("a", "u1", 0)
		if in, ok := e.info("o1"); ok && in.State != stock.StateRefunded {
			e.t.Fatalf("an order refunded line by line is %v, want refunded", in.State)
		}
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert of a fully returned order")
		e.want("a", 10, 0, 0)
		e.is(e.m.Confirm(e.ctx(), "o1"), stock.ErrOrderClosed, "Confirm of a fully returned order")
		e.is(e.deduct(order("o1", "u1", item("a", 4))), stock.ErrOrderClosed, "Deduct of a fully returned order")
		e.is(pr.RevertItems(e.ctx(), ret("r3", "o1", item("a", 1))), stock.ErrOrderClosed, "RevertItems of a fully returned order")
		e.mustDeduct(order("o3", "u1", item("a", 4)))
		e.want("a", 6, 4, 0)

		// A held order returned line by line ends reverted.
		e.sale("b", 10, 0, time.Minute)
		e.mustDeduct(order("o4", "u2", item("b", 2)))
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o4", item("b", 2))), nil, "RevertItems of a whole held order")
		e.want("b", 10, 0, 0)
		if in, ok := e.info("o4"); ok && in.State != stock.StateReverted {
			e.t.Fatalf("a held order returned whole is %v, want reverted", in.State)
		}
		e.is(e.m.Confirm(e.ctx(), "o4"), stock.ErrOrderClosed, "Confirm of a returned order")
		e.want("b", 10, 0, 0)
	})

	register("PartialRevertThenExpiry", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		e.sale("a", 10, 0, time.Minute)
		e.sale("b", 10, 0, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", 3), item("b", 1)))
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 2), item("b", 1))), nil, "RevertItems")
		e.want("a", 9, 1, 0)
		e.want("b", 10, 0, 0)
		e.clock.Advance(time.Minute)
		e.is(pr.RevertItems(e.ctx(), ret("r2", "o1", item("a", 1))), stock.ErrHoldExpired, "RevertItems at the deadline")
		e.want("a", 9, 1, 0)
		got := e.reclaimAll()
		if len(got) != 1 || got[0] != (stock.Reclaimed{OrderID: "o1", UserID: "u1", SKU: "a", Qty: 1}) {
			e.t.Fatalf("reclaimed %+v, want only what was left: o1 a 1", got)
		}
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
		e.is(pr.RevertItems(e.ctx(), ret("r2", "o1", item("a", 1))), stock.ErrHoldExpired, "RevertItems of an expired order")
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 2), item("b", 1))), nil, "an applied return repeated after expiry")
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert of an expired order")
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
	})

	register("LinesReturnedWholeStayOutOfTheCounts", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		e.sale("a", 10, 5, time.Minute)
		e.sale("b", 10, 5, time.Minute)
		// Confirm, Revert and a late Confirm of orders with one line
		// returned whole move only what the other lines still have.
		for _, id := range []string{"paid", "gone", "late"} {
			e.mustDeduct(order(id, "u1", item("a", 1), item("b", 1)))
			e.is(pr.RevertItems(e.ctx(), ret("r1", id, item("b", 1))), nil, "RevertItems of line b whole")
		}
		e.want("a", 7, 3, 0)
		e.want("b", 10, 0, 0)
		e.is(e.m.Confirm(e.ctx(), "paid"), nil, "Confirm")
		e.is(e.m.Revert(e.ctx(), "gone"), nil, "Revert")
		e.want("a", 8, 1, 1)
		e.want("b", 10, 0, 0)
		e.wantUser("a", "u1", 2)
		e.wantUser("b", "u1", 0)
		e.is(e.m.Revert(e.ctx(), "paid"), nil, "Revert (refund)")
		e.want("a", 9, 1, 0)
		e.clock.Advance(time.Minute)
		e.is(e.m.Confirm(e.ctx(), "late"), stock.ErrHoldExpired, "Confirm past the deadline")
		e.reclaimAll()
		e.want("a", 10, 0, 0)
		e.want("b", 10, 0, 0)
		e.wantUser("a", "u1", 0)
	})

	register("PartialRevertRefusals", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		e.sale("a", 10, 0, time.Minute)
		e.is(pr.RevertItems(e.ctx(), ret("r1", "never", item("a", 1))), stock.ErrUnknownOrder, "RevertItems of an unknown order")
		e.mustDeduct(order("o1", "", item("a", 2)))
		for _, r := range []stock.Return{
			ret("", "o1", item("a", 1)),
			ret("r1", "", item("a", 1)),
			ret("r1", "o1"),
			ret("r1", "o1", item("a", 0)),
			ret("r1", "o1", item("a", 1), item("a", 1)),
			ret("r}", "o1", item("a", 1)),
		} {
			e.is(pr.RevertItems(e.ctx(), r), stock.ErrInvalid, fmt.Sprintf("RevertItems(%+v)", r))
		}
		e.want("a", 8, 2, 0)
		e.is(e.m.Revert(e.ctx(), "o1"), nil, "Revert")
		e.is(pr.RevertItems(e.ctx(), ret("r1", "o1", item("a", 1))), stock.ErrOrderClosed, "RevertItems of a reverted order")
		e.want("a", 10, 0, 0)
	})

	register("ConcurrentPartialRevertsNeverExceedTheOrder", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		// 16 distinct returns of one unit and 6 retries of one more race for
		// an order of 10 units: 17 operations ask for more than it has, so
		// exactly 10 apply (the shared one counted once, however many of its
		// calls answer) and the order ends returned whole.
		const units, returns, same = 10, 16, 6
		e.sale("a", 20, 0, time.Minute)
		e.mustDeduct(order("o1", "u1", item("a", units)))
		var (
			wg                                   sync.WaitGroup
			mu                                   sync.Mutex
			applied, refused, sharedOK, sharedNo int
		)
		for i := range returns + same {
			wg.Add(1)
			go func() {
				defer wg.Done()
				op := fmt.Sprintf("r-%d", i)
				if i >= returns {
					op = "shared"
				}
				err := retry(func() error { return pr.RevertItems(e.ctx(), ret(op, "o1", item("a", 1))) })
				mu.Lock()
				defer mu.Unlock()
				no := errors.Is(err, stock.ErrExceedsOrder) || errors.Is(err, stock.ErrOrderClosed)
				switch {
				case err == nil && op == "shared":
					sharedOK++
				case no && op == "shared":
					sharedNo++
				case err == nil:
					applied++
				case no:
					refused++
				default:
					e.t.Errorf("RevertItems(%s): %v", op, err)
				}
			}()
		}
		wg.Wait()
		if sharedOK > 0 && sharedNo > 0 {
			e.t.Fatalf("the shared return both applied (%d calls) and was refused (%d calls)", sharedOK, sharedNo)
		}
		s := 0
		if sharedOK > 0 {
			s = 1
		}
		if applied+s != units || applied+refused != returns {
			e.t.Fatalf("%d distinct returns applied (+%d shared), %d refused: want %d units returned in all", applied, s, refused, units)
		}
		e.want("a", 20, 0, 0)
		e.wantUser("a", "u1", 0)
		if in, ok := e.info("o1"); ok && (in.State != stock.StateReverted || itemsString(in.Returned) != itemsString([]stock.Item{item("a", units)})) {
			e.t.Fatalf("Orders(o1) = %+v, want reverted with all %d units returned", in, units)
		}
		e.is(e.revertR("o1"), nil, "Revert")
		e.want("a", 20, 0, 0)
	})

	register("PartialRevertRacesRevert", func(e *env) {
		pr := e.partial()
		if pr == nil {
			return
		}
		const orders = 20
		e.sale("a", 100, 0, time.Minute)
		for i := range orders {
			e.mustDeduct(order(oid("o", i), "u1", item("a", 3)))
			if i%2 == 1 {
				e.is(e.confirmR(oid("o", i)), nil, "Confirm")
			}
		}
		var wg sync.WaitGroup
		for i := range orders {
			wg.Add(2)
			go func() {
				defer wg.Done()
				err := retry(func() error { return pr.RevertItems(e.ctx(), ret("r1", oid("o", i), item("a", 2))) })
				if err != nil && !errors.Is(err, stock.ErrOrderClosed) {
					e.t.Errorf("RevertItems(%s): %v", oid("o", i), err)
				}
			}()
			go func() {
				defer wg.Done()
				if err := e.revertR(oid("o", i)); err != nil {
					e.t.Errorf("Revert(%s): %v", oid("o", i), err)
				}
			}()
		}
		wg.Wait()
		e.want("a", 100, 0, 0)
		e.wantUser("a", "u1", 0)
	})
}
