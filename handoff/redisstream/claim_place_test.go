package redisstream

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Stream entry IDs compare as two numbers, not as text: "10-0" is after
// "9-5", and "5-10" after "5-9".
func TestIDNotAfterComparesNumbers(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9-5", "10-0", true},
		{"10-0", "9-5", false},
		{"5-9", "5-10", true},
		{"5-10", "5-9", false},
		{"5-9", "5-9", true},
		{"0-0", "0-0", true},
		{"1-0", "0-0", false},
		{"x", "5-9", false},
		{"5-9", "", false},
	} {
		if got := idNotAfter(c.a, c.b); got != c.want {
			t.Errorf("idNotAfter(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// A claim moves the place to its cursor while the cursor is not past the
// end of the pass; past it, or at the end of the pending entries, the
// next claim begins a new pass at the start. A claim that began where the
// place no longer is (another Source's claim moved it) leaves it.
func TestClaimScannedEndsPassPastItsEnd(t *testing.T) {
	q := &Queue{claimAt: claimPlace{from: passStart}}
	at := q.claimPlace()
	q.claimScanned(at, "9-5", "10-0")
	if got := q.claimPlace(); got.from != "9-5" || got.end != "10-0" {
		t.Fatalf("after a scan to 9-5 of the pass ending at 10-0: place %+v, want from 9-5, end 10-0", got)
	}
	stale := at // began at the start, before the place moved
	at = q.claimPlace()
	q.claimScanned(at, "10-0", at.end)
	if got := q.claimPlace(); got.from != "10-0" || got.end != "10-0" {
		t.Fatalf("after a scan to 10-0 (the end, not yet scanned): place %+v, want from 10-0, end 10-0", got)
	}
	q.claimScanned(stale, "3-0", "10-0")
	if got := q.claimPlace(); got.from != "10-0" {
		t.Fatalf("a claim that began at the start after the place moved moved it to %q, want it left at 10-0", got.from)
	}
	at = q.claimPlace()
	q.claimScanned(at, "10-1", at.end)
	if got := q.claimPlace(); got.from != passStart {
		t.Fatalf("after a scan past the end of the pass: place %+v, want a new pass at %s", got, passStart)
	}
	at = q.claimPlace()
	q.claimScanned(at, "4-0", "")
	if got := q.claimPlace(); got.from != passStart {
		t.Fatalf("after a scan of an empty stream's pass: place %+v, want a new pass at %s", got, passStart)
	}
	q.claimAt = claimPlace{from: "4-0", end: "10-0", gen: 7}
	at = q.claimPlace()
	q.claimScanned(at, passStart, at.end)
	if got := q.claimPlace(); got.from != passStart {
		t.Fatalf("after a scan that reached the last pending entry: place %+v, want a new pass at %s", got, passStart)
	}
}

// A claim that fails (here its context has ended) leaves the place where
// it was, and a claim of an empty stream ends its pass.
func TestClaimErrorLeavesPlace(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer rdb.Close()
	ctx := context.Background()
	q, err := New(ctx, rdb, Config{Stream: "s", Redelivery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src := &source{q: q, name: "c"}
	for _, from := range []string{passStart, "4-0"} {
		q.claimAt = claimPlace{from: from, end: "10-0", gen: 3}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := src.claim(cctx, 2); err == nil {
			t.Fatalf("claim from %s with an ended context: no error", from)
		}
		if got, want := q.claimPlace(), (claimPlace{from: from, end: "10-0", gen: 3}); got != want {
			t.Errorf("a failed claim from %s moved the place to %+v, want %+v", from, got, want)
		}
	}
	q.claimAt = claimPlace{from: passStart}
	if ds, err := src.claim(ctx, 2); err != nil || len(ds) != 0 {
		t.Fatalf("claim of an empty stream: %d deliveries, %v", len(ds), err)
	}
	if got := q.claimPlace(); got.from != passStart || got.gen != 1 {
		t.Errorf("after a claim of an empty stream: place %+v, want a new pass at %s", got, passStart)
	}
}
