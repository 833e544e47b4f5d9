package redisstock_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// storeCalls are the Store's methods that do I/O, each with the name its
// errors give the call.
var storeCalls = []struct {
	name string
	call func(context.Context, *redisstock.Store) error
}{
	{`deduct order "o-42"`, func(ctx context.Context, s *redisstock.Store) error { return s.Deduct(ctx, failFastOrder) }},
	{`confirm order "o-42"`, func(ctx context.Context, s *redisstock.Store) error { return s.Confirm(ctx, "o-42") }},
	{`revert order "o-42"`, func(ctx context.Context, s *redisstock.Store) error { return s.Revert(ctx, "o-42") }},
	{`revert items of order "o-42"`, func(ctx context.Context, s *redisstock.Store) error {
		return s.RevertItems(ctx, stock.Return{OpID: "r1", OrderID: "o-42", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}},
	{`extend hold of order "o-42"`, func(ctx context.Context, s *redisstock.Store) error {
		return s.ExtendHold(ctx, "o-42", time.Now().Add(time.Minute))
	}},
	{`put on sale SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		return s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 1, HoldTTL: time.Minute})
	}},
	{`put on sale`, func(ctx context.Context, s *redisstock.Store) error {
		return s.PutOnSaleMany(ctx, []stock.Listing{{SKU: "phone", Units: 1, HoldTTL: time.Minute}})
	}},
	{`restock SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		return s.Restock(ctx, stock.Restock{OpID: "op1", SKU: "phone", Units: 1})
	}},
	{`read available units of SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Available(ctx, "phone")
		return err
	}},
	{`read levels of SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Levels(ctx, "phone")
		return err
	}},
	{`read user units of SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.UserUnits(ctx, "phone", "u")
		return err
	}},
	{`read held orders of SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.HeldOrders(ctx, "phone")
		return err
	}},
	{`read orders`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Orders(ctx, []string{"o-42"})
		return err
	}},
	{`inspect`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Inspect(ctx, []string{"phone"})
		return err
	}},
	{`adjust SKU "phone"`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Adjust(ctx, "phone", redisstock.Fence{Gen: "g", Epoch: 1}, 1)
		return err
	}},
	{`relist`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Relist(ctx, []redisstock.Relist{{SKU: "phone", Fence: redisstock.Fence{Gen: "g", Epoch: 1}, HoldTTL: time.Minute}})
		return err
	}},
	{`snapshot`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "phone"}})
		return err
	}},
	{`claim rebuild`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.ClaimRebuild(ctx, []string{"phone"})
		return err
	}},
	{`rebuild`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Rebuild(ctx, []redisstock.Rebuild{{Listing: stock.Listing{SKU: "phone", Units: 1, HoldTTL: time.Minute}}})
		return err
	}},
	{`reclaim expired holds`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.ReclaimExpired(ctx, 10)
		return err
	}},
	{`migrate`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Migrate(ctx)
		return err
	}},
	{`mark`, func(ctx context.Context, s *redisstock.Store) error { return s.Mark(ctx) }},
	{`mark calibrated`, func(ctx context.Context, s *redisstock.Store) error { return s.Calibrated(ctx) }},
	{`read servers`, func(ctx context.Context, s *redisstock.Store) error {
		_, err := s.Servers(ctx)
		return err
	}},
}

// Every call on a server that refuses connections says which call failed
// and that Redis is unavailable, never the step inside it, and still
// matches the refused dial and not ErrUnknownOutcome (nothing was sent).
func TestCallErrorsNameTheCall(t *testing.T) {
	clients := map[string]func(addr string) redis.UniversalClient{
		"client": func(addr string) redis.UniversalClient {
			return redis.NewClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{addr}}).Simple())
		},
		"cluster": func(addr string) redis.UniversalClient {
			return redis.NewClusterClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{addr}}).Cluster())
		},
	}
	for kind, client := range clients {
		t.Run(kind, func(t *testing.T) {
			addr := closedAddr(t)
			captureGoRedisLog(t, addr) // keeps the dial failures off the test's output
			c := client(addr)
			defer c.Close()
			s, err := redisstock.New(c, redisstock.Config{})
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range storeCalls {
				err := sc.call(context.Background(), s)
				want := "redisstock: " + sc.name + ": redis unavailable: "
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s: %v, want %q...", sc.name, err, want)
				}
				if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, stock.ErrUnknownOutcome) {
					t.Errorf("%s: %v: want the refused dial, not ErrUnknownOutcome", sc.name, err)
				}
			}
		})
	}
}

// A call whose context ended before it sent anything says so, naming the
// call, and matches the context's error.
func TestCallErrorsNotSent(t *testing.T) {
	s := newStore(t, redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()}), redisstock.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sc := range storeCalls {
		err := sc.call(ctx, s)
		if want := "redisstock: " + sc.name + ": "; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q...", sc.name, err, want)
		}
		if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Errorf("%s: %v: want context.Canceled, not ErrUnknownOutcome", sc.name, err)
		}
	}
	err := s.Deduct(ctx, failFastOrder)
	if want := `redisstock: deduct order "o-42": not sent: context canceled`; err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
}

// A Deduct sent to a server that stopped answering names the call and the
// unknown outcome; a server's error reply names the call and the refusal.
func TestCallErrorsOutcomeAndRefusal(t *testing.T) {
	mr := miniredis.RunT(t)
	link, err := chaos.NewProxy(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	c := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{link.Addr()}}))
	defer c.Close()
	s, err := redisstock.New(c, redisstock.Config{Prefix: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	mr.Del("shop:{phone}:state")
	if err := mr.Set("shop:{phone}:state", "not a hash"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Available(ctx, "phone")
	var rerr redis.Error
	if want := `redisstock: read available units of SKU "phone": redis refused the request: WRONGTYPE`; err == nil ||
		!strings.HasPrefix(err.Error(), want) || !errors.As(err, &rerr) {
		t.Errorf("%v, want %q... matching a redis.Error", err, want)
	}

	link.Pause()
	err = s.Deduct(ctx, failFastOrder)
	if want := `redisstock: deduct order "o-42": outcome unknown, retry with the same order ID: `; err == nil ||
		!strings.HasPrefix(err.Error(), want) || !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Errorf("%v, want %q... matching ErrUnknownOutcome", err, want)
	}
}
