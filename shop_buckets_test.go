package stockguard_test

import (
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// clusterShopOn builds a Shop whose gate runs on a Redis Cluster client
// (miniredis answering for every slot), as the README's first block does
// with the addresses of a Cluster's nodes.
func clusterShopOn(t *testing.T) *stockguard.Shop {
	t.Helper()
	return clusterShopWith(t, miniredis.RunT(t), testdb.SQLite(t, 4).DB, stockguard.Config{})
}

// clusterShopWith builds a Shop with cfg (on a fake clock) on a Redis
// Cluster client over mr, and db.
func clusterShopWith(t *testing.T, mr *miniredis.Miniredis, db *sql.DB, cfg stockguard.Config) *stockguard.Shop {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	t.Cleanup(func() { rdb.Close() })
	cfg.Clock = stocktest.NewClock(stocktest.Epoch)
	shop, err := stockguard.New(rdb, db, cfg)
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
// "bad input ...; nothing was written"): the gate is asked before the
// record takes the listing, so the refusal writes nothing, at either tier,
// and is no failure of Redis for the breaker. Also with the gate wrapped
// (stocktest.Faulty forwards the check, as GateStore asks of every
// wrapper).
func TestShopRelistWithAnotherBucketCountWritesNothing(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		t.Run(map[bool]string{false: "gate", true: "wrapped gate"}[wrapped], func(t *testing.T) {
			var cfg stockguard.Config
			if wrapped {
				cfg.Wrap = func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
					return stocktest.NewFaulty(g), r
				}
			}
			shop := clusterShopWith(t, miniredis.RunT(t), testdb.SQLite(t, 4).DB, cfg)
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
		})
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
	if !errors.Is(err, stock.ErrUnavailable) || errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("PutOnSale in buckets at the record alone: %v; want stock.ErrUnavailable, nothing written", err)
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

// Two nodes put a new SKU on sale at once, in different bucket counts.
// Node A's check passes (the SKU is new to the gate); node B's listing
// (100 units in 3 buckets) lands, record and gate, before A writes its
// record; A then writes its 5 units at the record and the gate refuses
// its count. A's answer is a *tiered.TierError (its retry:
// stock.ErrInvalid), and the SKU is reported to OnDrift: the repair brings
// the gate down to the record.
func TestShopRivalFirstListingIsRepaired(t *testing.T) {
	mr := miniredis.RunT(t)
	db := testdb.SQLite(t, 4).DB
	nodeB := clusterShopWith(t, mr, db, stockguard.Config{})
	var once sync.Once
	var rival error
	var mu sync.Mutex
	var drifted []string
	cfg := stockguard.Config{Wrap: func(g tiered.GateStore, r tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
		f := stocktest.NewFaulty(r)
		f.SetBefore(func(c stocktest.Call) {
			if c.Method == "PutOnSale" {
				once.Do(func() { rival = nodeB.PutOnSale(t.Context(), stock.Listing{SKU: "phone", Units: 100, Buckets: 3}) })
			}
		})
		return g, f
	}}
	cfg.Flow.OnDrift = func(d tiered.Drift) {
		mu.Lock()
		defer mu.Unlock()
		drifted = append(drifted, d.SKUs...)
	}
	nodeA := clusterShopWith(t, mr, db, cfg)
	ctx := t.Context()
	first := nodeA.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5, Buckets: 2})
	if rival != nil {
		t.Fatalf("node B's listing: %v", rival)
	}
	retry := nodeA.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5, Buckets: 2})
	if !errors.As(first, new(*tiered.TierError)) || !errors.Is(retry, stock.ErrInvalid) {
		t.Errorf("node A's listing: %v, its retry: %v; want a *tiered.TierError, then stock.ErrInvalid", first, retry)
	}
	// The gate refused A's listing after the record took it: the SKU is
	// reported, and the repair that report starts brings the gate down to
	// the record.
	mu.Lock()
	reported := append([]string(nil), drifted...)
	mu.Unlock()
	if len(reported) != 1 || reported[0] != "phone" {
		t.Errorf("SKUs reported to OnDrift: %q, want [phone]", reported)
	}
	rep, err := nodeA.Reconciler().Repair(ctx, []string{"phone"})
	rec, gate := levels(t, nodeA.Record()), levels(t, nodeA.Gate())
	if gate.Available > rec.Available {
		t.Fatalf("after the repair (%+v, %v): gate available %d above the record's %d", rep, err, gate.Available, rec.Available)
	}
}

// On one Redis server (no hash slots) the gate keeps every SKU in one
// place and ignores Listing.Buckets (stock.Listing: "a Redis without hash
// slots ... ignore it"): the primary takes a listing with Buckets 3 as any
// other, and so does the record path while the breaker keeps traffic off
// the gate.
func TestShopOneServerListingWithBucketsAtTheFallback(t *testing.T) {
	shop, _, _ := shopOn(t, stockguard.Config{})
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "at-primary", Units: 30, Buckets: 3}); err != nil {
		t.Fatalf("at the primary: %v", err)
	}
	shop.SetMode(degrade.ForceFallback)
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 30, Buckets: 3}); err != nil {
		t.Fatalf("the same listing at the fallback, one-server gate that ignores Buckets: %v; want nil as at the primary", err)
	}
}

// A SKU in 3 buckets relisted with Buckets 1: the primary refuses it
// (another count, stock.ErrInvalid, nothing written), and the record path
// writes no listing that names a bucket count on a Cluster.
func TestShopRelistInOneBucketAtTheFallback(t *testing.T) {
	shop := clusterShopOn(t)
	ctx := t.Context()
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 30, Buckets: 3}); err != nil {
		t.Fatal(err)
	}
	one := stock.Listing{SKU: "phone", Units: 5, Buckets: 1}
	if err := shop.PutOnSale(ctx, one); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("relist in 1 bucket at the primary: %v, want stock.ErrInvalid", err)
	}
	shop.SetMode(degrade.ForceFallback)
	err := shop.PutOnSale(ctx, one)
	lv := levels(t, shop.Record())
	if err == nil || lv.Available != 30 {
		t.Fatalf("relist in 1 bucket at the fallback: %v, record available %d; want it refused (as at the primary) and the record at 30", err, lv.Available)
	}
}
