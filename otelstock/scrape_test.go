package otelstock_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace/noop"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/limiter"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// update rewrites the scrapes in testdata (and the rule tests made from
// them) and README.md's sample from a new scrape.
var update = flag.Bool("update", false, "rewrite testdata/*.prom, rules/stockguard_test.yml and README.md's sample from new scrapes")

// sale is a shop (stockguard.New) on miniredis and SQLite, every part and
// a limiter reporting to one Adapter, whose metrics OpenTelemetry's
// Prometheus exporter serves with its default options.
type sale struct {
	t    *testing.T
	ctx  context.Context
	mr   *miniredis.Miniredis
	rdb  *redis.Client
	shop *stockguard.Shop
	lim  *limiter.Local
	clk  *stocktest.Clock
	reg  *prometheus.Registry
	slow atomic.Bool // the gate's commands answer late
}

func newSale(t *testing.T, opts ...func(*stockguard.Config)) *sale {
	t.Helper()
	s := &sale{t: t, ctx: context.Background(), mr: miniredis.RunT(t), reg: prometheus.NewRegistry(),
		clk: stocktest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))}
	exporter, err := otelprom.New(otelprom.WithRegisterer(s.reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(resource.Empty()))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	a, err := otelstock.New(otelstock.Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	s.rdb = redis.NewClient(&redis.Options{Addr: s.mr.Addr(), MaxRetries: -1})
	s.rdb.AddHook(slowHook{&s.slow})
	t.Cleanup(func() { _ = s.rdb.Close() })
	db := sqlx.MustOpen("sqlite", "file:"+filepath.Join(t.TempDir(), "shop.db")+"?_pragma=busy_timeout(5000)")
	t.Cleanup(func() { _ = db.Close() })
	cfg := stockguard.Config{Observer: a.Observer(), Clock: s.clk}
	for _, o := range opts {
		o(&cfg)
	}
	if s.shop, err = stockguard.New(s.rdb, db.DB, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shop.Close)
	if err := s.shop.CreateTables(s.ctx); err != nil {
		t.Fatal(err)
	}
	if s.lim, err = limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Hour, Burst: 1},
		Observer: a.Observer(), Clock: s.clk}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []otelstock.Levels{{Source: s.shop.Gate(), Store: "gate"}, {Source: s.shop.Record(), Store: "record"}} {
		l.SKUs = []string{"phone"}
		if _, err := a.RegisterLevels(l); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// buy asks the limiter for user, then deducts one phone; it returns the
// limiter's refusal as stock.ErrLimitReached.
func (s *sale) buy(id, user string) error {
	if d, err := s.lim.Allow(s.ctx, user); err != nil || !d.Allowed {
		return errors.Join(stock.ErrLimitReached, err)
	}
	return s.shop.Deduct(s.ctx, stock.Order{ID: id, UserID: user, Items: []stock.Item{{SKU: "phone", Qty: 1}}})
}

func (s *sale) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// scrape returns the exposition the exporter serves now.
func (s *sale) scrape() string {
	s.t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	s.must(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	s.must(err)
	return string(b)
}

// slowHook delays every command by 50ms while on is set.
type slowHook struct{ on *atomic.Bool }

func (slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(50 * time.Millisecond)
		}
		return next(ctx, cmd)
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(50 * time.Millisecond)
		}
		return next(ctx, cmds)
	}
}

// A small, healthy sale: 3 phones, 5 buyers (one refused by the limiter,
// one sold out), one paid, one cancelled, a reclaim pass and a reconcile
// pass that find nothing.
func saleScrape(t *testing.T) string {
	s := newSale(t)
	s.must(s.shop.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 3, PerUserLimit: 1, HoldTTL: 15 * time.Minute}))
	for i, user := range []string{"alice", "bob", "bob", "carol", "dave"} {
		_ = s.buy(fmt.Sprint("o", i), user)
	}
	s.must(s.shop.Confirm(s.ctx, "o0"))
	s.must(s.shop.Revert(s.ctx, "o1"))
	_, err := s.shop.ReclaimExpired(s.ctx, 100)
	s.must(err)
	_, err = s.shop.Reconciler().RepairAll(s.ctx)
	s.must(err)
	return s.scrape()
}

// A sale that goes wrong: holds nobody pays (a backlog, then a reclaim
// pass that finds them 5 minutes late), units added to the gate alone
// (drift that reconcile corrects), a gate that answers too late (unknown
// outcomes), then a gate that is down (the breaker opens).
func outageScrape(t *testing.T) string {
	s := newSale(t)
	s.must(s.shop.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 20, HoldTTL: 15 * time.Minute}))
	for i := range 6 {
		s.must(s.shop.Deduct(s.ctx, stock.Order{ID: fmt.Sprint("late", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	}
	s.clk.Advance(20 * time.Minute)
	_, err := s.shop.ReclaimExpired(s.ctx, 100)
	s.must(err)
	for i := range 12 {
		s.must(s.shop.Deduct(s.ctx, stock.Order{ID: fmt.Sprint("held", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	}
	s.must(s.shop.Gate().Restock(s.ctx, stock.Restock{SKU: "phone", Units: 5, OpID: "gate-alone"}))
	_, err = s.shop.Reconciler().RepairAll(s.ctx)
	s.must(err)

	s.slow.Store(true)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Millisecond)
		err := s.shop.Deduct(ctx, stock.Order{ID: fmt.Sprint("slow", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}})
		cancel()
		if !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("a Deduct whose gate answered too late: %v, want ErrUnknownOutcome", err)
		}
	}
	time.Sleep(200 * time.Millisecond) // the late answers arrive
	s.slow.Store(false)

	s.mr.Close()
	for i := 0; s.shop.State("phone") == 0 && i < 20; i++ {
		_ = s.shop.Deduct(s.ctx, stock.Order{ID: fmt.Sprint("down", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}})
	}
	if st := s.shop.State("phone"); st.String() != "degraded" {
		t.Fatalf("breaker %v after the gate went down, want degraded", st)
	}
	return s.scrape()
}

// A sale whose orders reach the record through a queue: the consumer
// settles two orders a minute after they were published, and two more
// after their holds expired in the queue.
func handoffScrape(t *testing.T) string {
	q := handofftest.NewMemory(time.Hour)
	s := newSale(t, func(c *stockguard.Config) { c.Handoff = q })
	s.must(s.shop.PutOnSale(s.ctx, stock.Listing{SKU: "phone", Units: 10, HoldTTL: 15 * time.Minute}))
	c, err := s.shop.Consumer(q.Source(), handoff.ConsumerConfig{})
	s.must(err)
	settle := func(n int) {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		ds, err := q.Source().Fetch(ctx, n)
		if err != nil || len(ds) != n {
			t.Fatalf("Fetch = %d, %v; want %d", len(ds), err, n)
		}
		c.Settle(s.ctx, ds)
	}
	for i := range 2 {
		s.must(s.shop.Deduct(s.ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	}
	s.clk.Advance(time.Minute)
	settle(2)
	for i := 2; i < 4; i++ {
		s.must(s.shop.Deduct(s.ctx, stock.Order{ID: fmt.Sprint("o", i), Items: []stock.Item{{SKU: "phone", Qty: 1}}}))
	}
	s.clk.Advance(16 * time.Minute)
	settle(2)
	if q.Len() != 0 {
		t.Fatalf("%d messages left in the queue", q.Len())
	}
	return s.scrape()
}

// The scrapes in testdata are what the exporter serves after the sales
// above (durations aside): the rule tests and README.md's sample are made
// from them. Run with -update to rewrite them.
func TestScrapes(t *testing.T) {
	for name, run := range map[string]func(*testing.T) string{"sale": saleScrape, "outage": outageScrape, "handoff": handoffScrape} {
		got := run(t)
		path := filepath.Join("testdata", name+".prom")
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := stable(got), stable(string(want)); g != w {
			t.Errorf("%s: the scrape differs from %s (rerun with -update):\n%s", name, path, diffLines(w, g))
		}
	}
}

// timed matches the sample lines whose value depends on how long calls
// took: the buckets and sums of the duration histograms.
var timed = regexp.MustCompile(`(?m)^(stockguard_\w+_seconds_(?:bucket|sum))(\{[^}]*\})? .*$`)

// stable is an exposition with the values of timed lines left out.
func stable(expo string) string {
	return timed.ReplaceAllString(strings.ReplaceAll(expo, "\r", ""), "$1$2 *")
}

// diffLines lists the lines of a that b lacks (-) and those of b that a
// lacks (+).
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	var out bytes.Buffer
	for _, l := range strings.Split(a, "\n") {
		if !ib[l] {
			fmt.Fprintln(&out, "-", l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ia[l] {
			fmt.Fprintln(&out, "+", l)
		}
	}
	return out.String()
}

// readmeSeries are the series README.md's sample shows, by prefix.
var readmeSeries = []string{"stockguard_orders_total", "stockguard_calls_total{otel_scope_name=\"github.com/stockguard/stockguard/otelstock\",otel_scope_schema_url=\"\",otel_scope_version=\"\",stockguard_component=\"",
	"stockguard_breaker_status", "stockguard_limiter_decisions_total", "stockguard_stock_"}

// readmeMarker stands before README.md's sample block.
const readmeMarker = "<!-- otelstock TestREADMESample: the sale's scrape -->\n```\n"

// README.md's sample of the exposition is the sale's real scrape (its
// deduct calls, orders, breaker, limiter and stock series): rerun with
// -update to rewrite it.
func TestREADMESample(t *testing.T) {
	var want strings.Builder
	for _, l := range strings.Split(saleScrape(t), "\n") {
		for _, p := range readmeSeries {
			if strings.HasPrefix(l, p) && (!strings.HasPrefix(p, "stockguard_calls") || strings.Contains(l, `stockguard_operation="deduct"`)) {
				want.WriteString(l + "\n")
				break
			}
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(readme), readmeMarker)
	if !ok {
		t.Fatalf("README.md has no %q", readmeMarker)
	}
	block, after, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md's sample block is not closed")
	}
	if *update {
		if err := os.WriteFile("../README.md", []byte(before+readmeMarker+want.String()+"```\n"+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if block != want.String() {
		t.Errorf("README.md's sample is not the sale's scrape (rerun with -update):\n%s", diffLines(block, want.String()))
	}
}
