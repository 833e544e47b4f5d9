package sqlstock_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// proxied opens b's database through a proxy that can lose one reply.
func proxied(t *testing.T, b backend) (*chaos.Proxy, func() *sqlx.DB) {
	t.Helper()
	var dsn, driver, addr string
	switch b.dialect {
	case sqlstock.MariaDB:
		dsn, driver = testdb.DSN(t, testdb.MySQL), "mysql"
		addr = dsn[strings.Index(dsn, "tcp(")+4 : strings.Index(dsn, ")/")]
	case sqlstock.Postgres:
		dsn, driver = testdb.DSN(t, testdb.Postgres), "pgx"
		rest := dsn[strings.Index(dsn, "@")+1:]
		addr = rest[:strings.Index(rest, "/")]
	}
	p, err := chaos.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	pdsn := strings.Replace(dsn, addr, p.Addr(), 1)
	return p, func() *sqlx.DB { return testdb.Open(t, driver, pdsn, 8) }
}

// loseOnce makes p lose the reply to the first request containing one of
// words (case-insensitive) after it is armed.
func loseOnce(p *chaos.Proxy, words ...string) {
	var done atomic.Bool
	p.DropReplies(func(req []byte) bool {
		low := bytes.ToLower(req)
		for _, w := range words {
			hit := bytes.Contains(low, []byte(w))
			if w == "commit" { // the statement COMMIT, not "read committed"
				hit = bytes.HasSuffix(low, []byte("commit")) || bytes.Contains(low, []byte("commit\x00"))
			}
			if hit && done.CompareAndSwap(false, true) {
				if debugLost {
					println("LOST REPLY TO:", strconvQuote(req))
				}
				return true
			}
		}
		return false
	})
}

var debugLost = false

func strconvQuote(b []byte) string { return strconv.Quote(string(b)) }

// A reply lost after a write was sent: the call runs again and learns its
// outcome, applied exactly once; or it says stock.ErrUnknownOutcome, and a
// retry under the same ID applies nothing more.
func TestLostReplyAppliesOnce(t *testing.T) {
	forEachServerTx(t, strategies, lostReplies)
}

func lostReplies(t *testing.T, b backend, st sqlstock.Strategy) {
	ctx := context.Background()
	p, open := proxied(t, b)
	clock := stocktest.NewClock(time.Unix(1_800_000_000, 0))
	s := newStore(t, open(), sqlstock.Config{Dialect: b.dialect, Strategy: st, Clock: clock, LockWait: time.Second})
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 100, HoldTTL: time.Minute, MaxHoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	lv := func(sku string) stock.Levels {
		l, err := s.Levels(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	order := func(id string) stock.Order {
		return stock.Order{ID: id, UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}, {SKU: "b", Qty: 1}}}
	}
	try := func(name string, f func() error, words ...string) error {
		t.Helper()
		before := p.Dropped()
		loseOnce(p, words...)
		err := f()
		p.DropReplies(nil)
		if p.Dropped() == before {
			t.Logf("%s: no reply was lost", name)
		}
		if err != nil && !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Errorf("%s with a lost reply: %v; want nil (the re-run learned it) or stock.ErrUnknownOutcome", name, err)
		}
		t.Logf("%s: %v", name, err)
		return err
	}
	one := func(id string) stock.Order {
		return stock.Order{ID: id, Items: []stock.Item{{SKU: "a", Qty: 1}}}
	}
	// Deduct: two-line, then one-line without a limit (one statement on PostgreSQL).
	if err := try("Deduct", func() error { return s.Deduct(ctx, order("o1")) }, "commit"); errors.Is(err, stock.ErrUnknownOutcome) {
		if err := s.Deduct(ctx, order("o1")); err != nil {
			t.Errorf("retry of Deduct o1: %v", err)
		}
	}
	if err := try("Deduct one line", func() error { return s.Deduct(ctx, one("o2")) }, "commit", "insert"); errors.Is(err, stock.ErrUnknownOutcome) {
		if err := s.Deduct(ctx, one("o2")); err != nil {
			t.Errorf("retry of Deduct o2: %v", err)
		}
	}
	if l := lv("a"); l.Available != 97 || l.Held != 3 {
		t.Errorf("after two Deducts with lost replies: a %+v, want 97 available, 3 held", l)
	}
	for _, id := range []string{"o3", "o4", "o5", "o6"} {
		if err := s.Deduct(ctx, order(id)); err != nil {
			t.Fatal(err)
		}
	}
	// a: 100 - 2*5 - 1 = 89 available, 11 held.
	try("Confirm", func() error { return s.Confirm(ctx, "o1") }, "commit")
	try("Revert", func() error { return s.Revert(ctx, "o3") }, "commit")
	try("RevertItems", func() error {
		return s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o4", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	}, "commit")
	try("Restock", func() error { return s.Restock(ctx, stock.Restock{OpID: "k1", SKU: "a", Units: 5}) }, "commit")
	try("ExtendHold", func() error { return s.ExtendHold(ctx, "o5", clock.Now().Add(10*time.Minute)) }, "commit", "update")
	// Retries of all of them change nothing more.
	_ = s.Confirm(ctx, "o1")
	_ = s.Revert(ctx, "o3")
	_ = s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o4", Items: []stock.Item{{SKU: "a", Qty: 1}}})
	_ = s.Restock(ctx, stock.Restock{OpID: "k1", SKU: "a", Units: 5})
	// a: held o2(1) o4(2-1) o5(2) o6(2) = 6; sold o1 2; available 105 - 8 = 97.
	if l := lv("a"); l.Available != 97 || l.Held != 6 || l.Sold != 2 {
		t.Errorf("a after lost replies and retries: %+v; want 97 available, 6 held, 2 sold", l)
	}
	if l := lv("b"); l.Available != 96 || l.Held != 3 || l.Sold != 1 {
		t.Errorf("b after lost replies and retries: %+v; want 96 available, 3 held, 1 sold", l)
	}
	// Reclaim: o2, o4, o6 expire (o5 was extended by 10 minutes).
	clock.Advance(5 * time.Minute)
	loseOnce(p, "commit")
	_, err := s.ReclaimExpired(ctx, 100)
	p.DropReplies(nil)
	t.Logf("ReclaimExpired with a lost reply: %v", err)
	for range 3 {
		if _, err := s.ReclaimExpired(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if l := lv("a"); l.Available != 101 || l.Held != 2 || l.Sold != 2 {
		t.Errorf("a after reclaim: %+v; want 101 available, 2 held (o5), 2 sold", l)
	}
}
