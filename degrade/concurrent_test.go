package degrade_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/memstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// The recommended wiring under concurrent buyers while the gate starts
// losing replies: the breaker opens, orders continue on the record, and
// the record holds exactly the units of the orders that were told yes.
func TestGateLosesRepliesMidSale(t *testing.T) {
	const units, buyers = 100, 300
	clock := stocktest.NewClock(stocktest.Epoch)
	gate := stocktest.NewFaulty(memstock.New(clock))
	record := memstock.New(clock)
	d := mustNew(t, tiered.New(gate, record, tiered.Config{Clock: clock}), nil,
		degrade.Config{Clock: clock, FallbackLimit: rate.Inf})
	defer d.Close()
	ctx := t.Context()
	if err := d.PutOnSale(ctx, stock.Listing{SKU: "hot", Units: units}); err != nil {
		t.Fatal(err)
	}
	var (
		wg               sync.WaitGroup
		yes, no, unknown atomic.Int64
		started          atomic.Int64
		mu               sync.Mutex
		unresolved       []stock.Order
	)
	for b := range buyers {
		wg.Go(func() {
			if started.Add(1) == buyers/4 {
				gate.SetFault(stocktest.LostReply)
			}
			o := stock.Order{ID: fmt.Sprint("b", b), Items: []stock.Item{{SKU: "hot", Qty: 1}}}
			for try := 0; ; try++ {
				err := d.Deduct(ctx, o)
				switch {
				case err == nil:
					yes.Add(1)
					return
				case errors.Is(err, stock.ErrSoldOut):
					no.Add(1)
					return
				case errors.Is(err, stock.ErrUnknownOutcome) && try < 3:
				case errors.Is(err, stock.ErrUnknownOutcome):
					unknown.Add(1)
					mu.Lock()
					unresolved = append(unresolved, o)
					mu.Unlock()
					return
				default:
					t.Errorf("Deduct: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	// The gate heals; buyers who were told "unknown" retry and learn the
	// truth, while the breaker is still open: their retries go to the
	// primary (never the fallback) and take nothing twice.
	// A buyer whose order the record refused, and whose gate hold's revert
	// lost its reply, learns on the retry that the order is closed (the
	// revert did land): refused, holding nothing.
	gate.SetFault(stocktest.Healthy)
	for _, o := range unresolved {
		switch err := d.Deduct(ctx, o); {
		case err == nil:
			yes.Add(1)
		case errors.Is(err, stock.ErrSoldOut), errors.Is(err, stock.ErrOrderClosed):
			no.Add(1)
		default:
			t.Fatalf("retry of %s: %v", o.ID, err)
		}
	}
	lv, err := record.Levels(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	if lv.Held != yes.Load() || lv.Available+lv.Held != units {
		t.Fatalf("record %+v after %d yes, %d sold out, %d unknown", lv, yes.Load(), no.Load(), unknown.Load())
	}
	if d.State("hot") == degrade.Primary {
		t.Fatal("the breaker never opened")
	}
	if yes.Load()+no.Load() != buyers {
		t.Fatal("lost a buyer")
	}
	t.Logf("%d yes, %d sold out, %d unknown; record %+v", yes.Load(), no.Load(), unknown.Load(), lv)
}
