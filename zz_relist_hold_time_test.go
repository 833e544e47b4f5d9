package stockguard_test

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// A Shop wired as the README wires it (Config{}, so the record's grace is
// each listing's hold time). Node B's breaker keeps traffic off Redis and
// takes o1 at the record alone with the listing's 10-minute hold. The
// operator then lengthens the SKU's hold time to an hour with PutOnSale
// (the units unchanged). Five minutes later the buyer pays: the flow reads
// o1's gate deadline back from the record's deadline less today's grace
// (an hour), finds it long past, and refuses the payment with
// ErrHoldExpired, returning the unit, on either node. The promise: "One
// order, one deadline: now plus the shortest hold time of its SKUs", and
// ErrHoldExpired means "the hold passed its deadline unpaid". stock/tiered
// documents that "with zero a SKU relisted with a longer hold time has
// the copies the gate does not know ... returned before their deadline"
// and to "Set RecordGrace where hold times differ or change", but the
// Shop's default (and README) leave it zero and neither warns nor refuses.
func TestZZPaymentWithinTheHoldTimeAfterARelistIsSold(t *testing.T) {
	for _, via := range []string{"gate node", "fallback node"} {
		t.Run(via, func(t *testing.T) {
			a, b, clock := twoNodes(t)
			ctx := t.Context()
			if err := a.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 10 * time.Minute}); err != nil {
				t.Fatal(err)
			}
			b.SetMode(degrade.ForceFallback)
			if err := b.Deduct(ctx, order("o1", 1)); err != nil {
				t.Fatal(err)
			}
			if err := a.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 9, HoldTTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(5 * time.Minute)
			if _, err := a.ReclaimExpired(ctx, 100); err != nil { // Run's reclaimer
				t.Fatal(err)
			}
			payer := a
			if via == "fallback node" {
				payer = b
			}
			err := payer.Confirm(ctx, "o1")
			r := levels(t, a.Record())
			if err != nil || r.Sold != 1 {
				t.Errorf("payment 5 minutes into a 10-minute hold: %v; record %+v; want nil and the unit sold", err, r)
			}
		})
	}
}
