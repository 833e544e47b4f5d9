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
// next claim begins a new pass at the start.
func TestClaimPlaceEndsPassPastItsEnd(t *testing.T) {
	for _, c := range []struct {
		at   claimPlace
		next string
		want claimPlace
	}{
		{claimPlace{from: passStart, end: "10-0"}, "9-5", claimPlace{from: "9-5", end: "10-0"}},
		{claimPlace{from: "9-5", end: "10-0"}, "10-0", claimPlace{from: "10-0", end: "10-0"}}, // the end, not yet scanned
		{claimPlace{from: "10-0", end: "10-0"}, "10-1", claimPlace{from: passStart}},
		{claimPlace{from: passStart, end: passStart}, "4-0", claimPlace{from: passStart}}, // nothing was pending
		{claimPlace{from: "4-0", end: "10-0"}, passStart, claimPlace{from: passStart}},    // reached the last pending entry
	} {
		if got := c.at.after(c.next); got != c.want {
			t.Errorf("%+v after a scan to %s: %+v, want %+v", c.at, c.next, got, c.want)
		}
	}
}

// A claim that fails (here its context has ended) leaves the place where
// it was; a claim of an empty stream ends its pass; a claim while another
// claim of the Queue is under way claims nothing and leaves the place.
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
		want := claimPlace{from: from, end: "10-0"}
		q.claimAt = want
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := src.claim(cctx, 2); err == nil {
			t.Fatalf("claim from %s with an ended context: no error", from)
		}
		if q.claimAt != want {
			t.Errorf("a failed claim from %s moved the place to %+v, want %+v", from, q.claimAt, want)
		}
		q.claiming.Lock()
		ds, err := src.claim(ctx, 2)
		q.claiming.Unlock()
		if err != nil || len(ds) != 0 || q.claimAt != want {
			t.Errorf("a claim while another is under way: %d deliveries, %v, place %+v; want none, nil, %+v", len(ds), err, q.claimAt, want)
		}
	}
	q.claimAt = claimPlace{from: passStart}
	if ds, err := src.claim(ctx, 2); err != nil || len(ds) != 0 {
		t.Fatalf("claim of an empty stream: %d deliveries, %v", len(ds), err)
	}
	if q.claimAt.from != passStart {
		t.Errorf("after a claim of an empty stream: place %+v, want a new pass at %s", q.claimAt, passStart)
	}
}
