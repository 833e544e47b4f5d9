package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer the sale and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var metricsURL = regexp.MustCompile(`metrics on (http://\S+/metrics)`)

// wantedSeries is a metric name and labels one of its series has.
type wantedSeries struct {
	name   string
	labels []string // k="v"
}

// wantSeries are series /metrics serves while the sale runs: the library's
// through the OpenTelemetry adapter (calls of every layer, redisstock's
// batches, the limiter, reclaim passes, both tiers' levels) and the sale's
// own queue depth.
var wantSeries = []wantedSeries{
	{"stockguard_calls_total", []string{`stockguard_component="degrade"`, `stockguard_operation="deduct"`, `stockguard_outcome="ok"`}},
	{"stockguard_calls_total", []string{`stockguard_component="tiered"`, `stockguard_operation="deduct"`, `stockguard_outcome="ok"`}},
	{"stockguard_calls_total", []string{`stockguard_component="redisstock"`, `stockguard_operation="deduct"`, `stockguard_outcome="ok"`}},
	{"stockguard_calls_total", []string{`stockguard_component="sqlstock"`, `stockguard_operation="deduct"`, `stockguard_outcome="ok"`}},
	{"stockguard_call_duration_seconds_bucket", []string{`stockguard_component="tiered"`, `stockguard_operation="deduct"`}},
	{"stockguard_batch_size_bucket", []string{`stockguard_component="redisstock"`, `stockguard_operation="deduct"`}},
	{"stockguard_limiter_decisions_total", []string{`stockguard_limiter="local"`, `stockguard_limiter_decision="allowed"`}},
	{"stockguard_reclaim_passes_total", []string{`stockguard_component="redisstock"`, `stockguard_outcome="ok"`}},
	{"stockguard_stock_available", []string{`stockguard_sku="sku-1"`, `stockguard_store="gate"`}},
	{"stockguard_stock_held", []string{`stockguard_sku="sku-3"`, `stockguard_store="record"`}},
	{"flashsale_queue_depth", nil},
}

// missing returns the wanted series body lacks.
func missing(body string) []wantedSeries {
	var out []wantedSeries
	lines := strings.Split(body, "\n")
	for _, w := range wantSeries {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, w.name+"{") && all(l, w.labels) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

func all(line string, subs []string) bool {
	for _, s := range subs {
		if !strings.Contains(line, s) {
			return false
		}
	}
	return true
}

// anID matches a user or order ID of the sale as a label value.
var anID = regexp.MustCompile(`="[uo][0-9]+"`)

// A sale with -metrics serves the library's metrics on /metrics while it
// runs (and not after), and -plot draws it into a PNG.
func TestMetricsAndPlot(t *testing.T) {
	t.Parallel()
	png := filepath.Join(t.TempDir(), "sale.png")
	// A hold longer than the sale: on a starved machine a shorter one
	// expires in the queue, and the record takes no Deduct while /metrics
	// is served.
	args := []string{"-json", "-quiet", "-units", "200", "-skus", "3", "-attempts", "2000", "-users", "500",
		"-duration", "1s", "-hold", "2s", "-workers", "16", "-metrics", "127.0.0.1:0", "-plot", png}
	var out bytes.Buffer
	errs := &lockedBuffer{}
	done := make(chan int)
	go func() { done <- run(context.Background(), args, &out, errs) }()

	var url, body string
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if url == "" {
				if m := metricsURL.FindStringSubmatch(errs.String()); m != nil {
					url = m[1]
				}
				continue
			}
			resp, err := http.Get(url)
			if err != nil {
				return // the sale is over
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); len(missing(body)) == 0 {
				return
			}
		}
	}()
	code := <-done
	<-scraped
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	if url == "" {
		t.Fatalf("no metrics address on stderr:\n%s", errs.String())
	}
	if m := missing(body); len(m) > 0 {
		t.Errorf("/metrics during the sale lacks %v\n%s", m, body)
	}
	if id := anID.FindString(body); id != "" {
		t.Errorf("/metrics names a user or an order: %s", id)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("%s still answers after the sale", url)
	}
	checkDrawn(t, decodePNG(t, png))
}

func TestPlotFlagWantsPNG(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"-plot", "sale.svg"}, &out, &errs); code != exitBadUsage {
		t.Errorf("-plot sale.svg: exit %d, want %d", code, exitBadUsage)
	}
	if !strings.Contains(errs.String(), ".png") {
		t.Errorf("stderr %q does not say what -plot wants", errs.String())
	}
}

// A -plot file that cannot be created fails the run before the sale.
func TestPlotFileUnwritable(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	start := time.Now()
	path := filepath.Join(t.TempDir(), "no-such-dir", "sale.png")
	if code := run(context.Background(), []string{"-quiet", "-plot", path}, &out, &errs); code != exitFailed {
		t.Errorf("-plot %s: exit %d, want %d", path, code, exitFailed)
	}
	if !strings.Contains(errs.String(), "-plot") || time.Since(start) > 5*time.Second {
		t.Errorf("after %v, stderr %q: want -plot named before the 8s sale", time.Since(start), errs.String())
	}
}

func TestMetricsFlagBadAddress(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"-quiet", "-metrics", "no-such-host-xyz:abc"}, &out, &errs); code != exitFailed {
		t.Errorf("-metrics on a bad address: exit %d, want %d", code, exitFailed)
	}
	if !strings.Contains(errs.String(), "-metrics") {
		t.Errorf("stderr %q does not name -metrics", errs.String())
	}
}
