package degrade_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/stock"
)

// Restock: "Restock goes where PutOnSale goes"; PutOnSale: "While the
// breaker recalibrates the primary it gets ErrBusy, nothing written: the
// recalibration would miss a listing written at the fallback alone".
// Place: "Once a breaker has begun to recalibrate the primary, no new order
// is written at the fallback alone". A Restock while the SKU's breaker
// recalibrates must get ErrBusy, with nothing written at the fallback, as
// PutOnSale does.
func TestRestockWhileRecalibratingGoesWherePutOnSaleGoes(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	f := newFixture(t, degrade.Config{PerSKU: 1, OpenFor: time.Minute, RampSteps: []float64{},
		Recalibrate: func(context.Context, string) error {
			close(started)
			<-release
			return nil
		}})
	defer close(release)
	f.sale("a", 10)
	f.trip("a", "a")
	f.clock.Advance(time.Minute)
	if err := f.deduct("starts-recalibration", "a", 1); !errors.Is(err, degrade.ErrBusy) {
		t.Fatalf("order as the recalibration starts: %v, want ErrBusy", err)
	}
	<-started
	if st := f.d.State("a"); st != degrade.Recalibrating {
		t.Fatalf("state %v, want recalibrating", st)
	}
	perr := f.d.PutOnSale(t.Context(), stock.Listing{SKU: "a", Units: 20})
	rerr := f.d.Restock(t.Context(), stock.Restock{OpID: "delivery-1", SKU: "a", Units: 5})
	if !errors.Is(perr, degrade.ErrBusy) || !errors.Is(rerr, degrade.ErrBusy) || f.fallback.Calls("Restock") != 0 {
		t.Fatalf("while a recalibrates: PutOnSale %v, Restock %v (fallback Restocks %d); want both ErrBusy, nothing written",
			perr, rerr, f.fallback.Calls("Restock"))
	}
}
