package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// refusedBound is how long a Deduct against a port nobody listens on may
// take on a FailFast client. It takes well under a millisecond here (the
// bound leaves two orders of magnitude for a loaded machine); go-redis's
// defaults cannot meet it: their first failed call alone waits 4 x 100ms
// between its 5 dial attempts (about 3s measured, with the retries).
const refusedBound = 200 * time.Millisecond

// silentBound is how long a Deduct against a server that accepts and never
// answers may take on a FailFast client: its ReadTimeout (250ms) with 4
// times that to spare. go-redis's default ReadTimeout alone is 5s.
const silentBound = time.Second

// goRedisLog captures the lines go-redis logs that name addr until the
// test ends, then puts go-redis's default logger back.
type goRedisLog struct {
	addr  string
	mu    sync.Mutex
	lines []string
}

func captureGoRedisLog(t testing.TB, addr string) *goRedisLog {
	l := &goRedisLog{addr: addr}
	redis.SetLogger(l)
	t.Cleanup(logging.Enable)
	return l
}

func (l *goRedisLog) Printf(_ context.Context, format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, l.addr) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *goRedisLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// silentServer listens on loopback, accepts every connection and never
// answers.
func silentServer(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

var failFastOrder = stock.Order{ID: "o-42", UserID: "u", Items: []stock.Item{{SKU: "phone", Qty: 1}}}

// A refused server: every Deduct fails at once with the refused dial (not
// ErrUnknownOutcome: nothing was sent), logs at most one line, and once
// PoolSize calls failed the pool stops dialing and nothing more is logged.
func TestFailFastRefused(t *testing.T) {
	addr := closedAddr(t)
	log := captureGoRedisLog(t, addr)
	c := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{addr}}))
	defer c.Close()
	s, err := redisstock.New(c, redisstock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pool := c.(*redis.Client).Options().PoolSize
	ctx := context.Background()
	for i := range pool + 10 {
		before := log.count()
		start := time.Now()
		err := s.Deduct(ctx, failFastOrder)
		if took := time.Since(start); took > refusedBound {
			t.Fatalf("call %d took %v, above %v", i, took, refusedBound)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("call %d: %v, want the refused dial, not ErrUnknownOutcome", i, err)
		}
		switch n := log.count() - before; {
		case n > 1:
			t.Fatalf("call %d logged %d lines: %q", i, n, log.lines[before:])
		case i >= pool && n > 0:
			t.Fatalf("call %d, after %d failed dials, logged %q", i, pool, log.lines[before:])
		}
	}
	for _, line := range log.lines {
		if !strings.Contains(line, "failed to dial") {
			t.Errorf("go-redis logged %q, which the filter in FailFast's doc keeps", line)
		}
	}
}

// A server that accepts and never answers: a Deduct fails at the
// ReadTimeout, not go-redis's 5s, and logs nothing.
func TestFailFastSilent(t *testing.T) {
	addr := silentServer(t)
	log := captureGoRedisLog(t, addr)
	c := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{addr}}))
	defer c.Close()
	s, err := redisstock.New(c, redisstock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		err := s.Deduct(context.Background(), failFastOrder)
		if took := time.Since(start); took > silentBound {
			t.Fatalf("call %d took %v, above %v", i, took, silentBound)
		}
		var nerr net.Error
		if !errors.As(err, &nerr) || !nerr.Timeout() {
			t.Fatalf("call %d: %v, want a timeout", i, err)
		}
	}
	if log.count() > 0 {
		t.Fatalf("go-redis logged %q", log.lines)
	}
}

// A server that stops answering during the sale: the Deduct whose script
// was sent fails at the ReadTimeout, with ErrUnknownOutcome.
func TestFailFastStopsAnswering(t *testing.T) {
	mr := miniredis.RunT(t)
	link, err := chaos.NewProxy(mr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	c := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{link.Addr()}}))
	defer c.Close()
	s, err := redisstock.New(c, redisstock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	link.Pause()
	start := time.Now()
	err = s.Deduct(ctx, failFastOrder)
	if took := time.Since(start); took > silentBound {
		t.Fatalf("took %v, above %v", took, silentBound)
	}
	if !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("%v, want ErrUnknownOutcome", err)
	}
}

// FailFast keeps what the caller set, and fills new options for nil.
func TestFailFastKeepsSetFields(t *testing.T) {
	o := redisstock.FailFast(&redis.UniversalOptions{ReadTimeout: time.Second, MaxRetries: 2})
	if o.ReadTimeout != time.Second || o.MaxRetries != 2 {
		t.Fatalf("ReadTimeout %v, MaxRetries %d: the caller's were replaced", o.ReadTimeout, o.MaxRetries)
	}
	if o.DialTimeout != 250*time.Millisecond || o.DialerRetries != 1 {
		t.Fatalf("DialTimeout %v, DialerRetries %d: unset fields not filled", o.DialTimeout, o.DialerRetries)
	}
	if o := redisstock.FailFast(nil); o == nil || o.DialTimeout != 250*time.Millisecond {
		t.Fatalf("FailFast(nil) = %+v", o)
	}
}

// BenchmarkDownServer measures how long a Deduct takes to fail when the
// server goes down during a sale, on a client with go-redis's defaults and
// on one with FailFast: refused (nothing listens on its port any more) and
// silent (it accepts and never answers). Each run makes a Store ready on
// miniredis behind a proxy, then closes the proxy (refused) or pauses it
// (silent); ns/op is the mean time to the error over b.N Deducts,
// first-ms the first one's, logs/op the lines go-redis logged. The
// defaults' silent case waits 5s per Deduct. Run:
//
//	go test -run '^$' -bench DownServer -benchtime 20x ./stock/redisstock/
func BenchmarkDownServer(b *testing.B) {
	clients := []struct {
		name string
		opts func(addr string) *redis.UniversalOptions
	}{
		{"defaults", func(addr string) *redis.UniversalOptions { return &redis.UniversalOptions{Addrs: []string{addr}} }},
		{"FailFast", func(addr string) *redis.UniversalOptions {
			return redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{addr}})
		}},
	}
	downs := []struct {
		name string
		take func(*chaos.Proxy)
	}{
		{"refused", func(p *chaos.Proxy) { _ = p.Close() }},
		{"silent", (*chaos.Proxy).Pause},
	}
	for _, cl := range clients {
		for _, down := range downs {
			b.Run(cl.name+"/"+down.name, func(b *testing.B) {
				mr := miniredis.RunT(b)
				link, err := chaos.NewProxy(mr.Addr())
				if err != nil {
					b.Fatal(err)
				}
				defer link.Close()
				c := redis.NewUniversalClient(cl.opts(link.Addr()))
				defer c.Close()
				s, err := redisstock.New(c, redisstock.Config{})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if err := s.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 1 << 30, HoldTTL: time.Minute}); err != nil {
					b.Fatal(err)
				}
				log := captureGoRedisLog(b, link.Addr())
				down.take(link)
				var first time.Duration
				b.ResetTimer()
				for i := range b.N {
					start := time.Now()
					if s.Deduct(ctx, stock.Order{ID: fmt.Sprint("o-", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}}) == nil {
						b.Fatal("a Deduct succeeded with the server down")
					}
					if i == 0 {
						first = time.Since(start)
					}
				}
				b.StopTimer()
				b.ReportMetric(first.Seconds()*1e3, "first-ms")
				b.ReportMetric(float64(log.count())/float64(b.N), "logs/op")
			})
		}
	}
}
