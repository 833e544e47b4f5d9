package stockguard_test

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// clusterShopOn builds a Shop whose gate runs on a Redis Cluster client
// (miniredis answering for every slot), as the README's first block does
// with the addresses of a Cluster's nodes.
func clusterShopOn(t *testing.T) *stockguard.Shop {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	shop, err := stockguard.New(rdb, testdb.SQLite(t, 4).DB, stockguard.Config{Clock: stocktest.NewClock(stocktest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shop.Close)
	if err := shop.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	return shop
}

// A SKU's bucket count is set when it is first put on sale, and another
// count is refused (README, "One hot SKU on many masters: buckets":
// "another count is refused: sell it under a new SKU"; stock.ErrInvalid is
// "bad input ...; nothing was written"). Through the Shop the record takes
// the new listing first (it ignores Buckets) and only then does the gate
// refuse the count: the answer is a *tiered.TierError, an unknown outcome
// telling the caller to retry, which fails the same way for ever, and the
// record is left with the refused listing's units and limit while the gate
// keeps the old ones (gate 100 against record 5 here). The breaker counts
// each refusal as a failure of Redis: the fifth opens it, though Redis is
// healthy, and the next retry is taken at the record alone and answered
// nil, as are the shop's orders until the breaker recalibrates.
func TestShopRelistWithAnotherBucketCountWritesNothing(t *testing.T) {
	shop := clusterShopOn(t)
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, Buckets: 3}); err != nil {
		t.Fatal(err)
	}
	bad := stock.Listing{SKU: "phone", Units: 5, PerUserLimit: 1, Buckets: 2}
	for attempt := 1; attempt <= 6; attempt++ { // the first call and the retries an unknown outcome asks for
		err := shop.PutOnSale(ctx, bad)
		if !errors.Is(err, stock.ErrInvalid) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Errorf("attempt %d: PutOnSale with another bucket count: %v; want stock.ErrInvalid alone (refused, nothing written)", attempt, err)
		}
	}
	if s := shop.State("phone"); s != degrade.Primary {
		t.Errorf("breaker %v after refused listings on a healthy Redis, want primary", s)
	}
	rec, gate := levels(t, shop.Record()), levels(t, shop.Gate())
	if rec.Available != 100 || rec.PerUserLimit != 0 {
		t.Errorf("record after the refused listing: available %d, per-user limit %d; want 100 and 0 (nothing written)", rec.Available, rec.PerUserLimit)
	}
	if gate.Available > rec.Available {
		t.Errorf("gate available %d above the record's %d after the refused listing", gate.Available, rec.Available)
	}
}

// A listing in buckets is not written at the record alone while the
// breaker keeps traffic off Redis (here the operator's ForceFallback; an
// outage takes the same path): the record has no bucket count, and the
// gate the recalibration rebuilds from it would sell the hot SKU from one
// bucket, its count fixed from then on. It is refused with nothing
// written, and put on sale in its buckets once traffic is back.
func TestShopListingInBucketsWaitsForTheGate(t *testing.T) {
	shop := clusterShopOn(t)
	ctx := t.Context()
	l := stock.Listing{SKU: "phone", Units: 30, Buckets: 3}
	shop.SetMode(degrade.ForceFallback)
	err := shop.PutOnSale(ctx, l)
	if !errors.Is(err, degrade.ErrPrimaryDown) || !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("PutOnSale in buckets at the record alone: %v; want degrade.ErrPrimaryDown and stock.ErrUnavailable, nothing written", err)
	}
	if _, err := shop.Record().Levels(ctx, "phone"); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("record after the refused listing: %v; want stock.ErrUnknownSKU (nothing written)", err)
	}
	shop.SetMode(degrade.Auto)
	_ = shop.Deduct(ctx, order("starts-recalibration", 1))
	if s := waitState(t, shop); s != degrade.Primary && s != degrade.Ramping {
		t.Fatalf("breaker %v after the recalibration", s)
	}
	if err := shop.PutOnSale(ctx, l); err != nil {
		t.Fatal(err)
	}
	// The gate has the listing's 3 buckets: a repeat of the count is
	// accepted, another is refused.
	if err := shop.Gate().PutOnSale(ctx, l); err != nil {
		t.Errorf("the gate does not have the listing's 3 buckets: %v", err)
	}
	if err := shop.Gate().PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 30, Buckets: 2}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("another bucket count at the gate: %v; want stock.ErrInvalid", err)
	}
	if lv := levels(t, shop.Record()); lv.Available != 30 {
		t.Errorf("record available %d, want 30", lv.Available)
	}
}
