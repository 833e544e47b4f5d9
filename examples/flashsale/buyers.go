package main

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/stockguard/stockguard/stock"
)

// attempt is one buyer pressing "buy".
type attempt struct {
	n    int
	user string
	sku  string
	qty  int64
}

// crowd makes the sale's attempts: most buyers try once or twice, and a few
// bots (1% of the users) send a fifth of all attempts, which is what the
// per-user rate limit is for. A fifth of the attempts ask for 2 units.
type crowd struct {
	users, bots int
	skus        []string
}

func (c crowd) next(n int) attempt {
	u := rand.IntN(c.users)
	if rand.Float64() < 0.2 {
		u = rand.IntN(c.bots)
	}
	qty := int64(1)
	if rand.Float64() < 0.2 {
		qty = 2
	}
	return attempt{n: n, user: "u" + strconv.Itoa(u), sku: c.skus[rand.IntN(len(c.skus))], qty: qty}
}

// buyers sends cfg.attempts attempts, evenly spread over cfg.duration, to
// cfg.workers concurrent buyers, and returns when all are answered.
func buyers(ctx context.Context, cfg config, sh *shop, skus []string, progress io.Writer) {
	bar := newBar(cfg, progress)
	c := crowd{users: cfg.users, bots: max(1, cfg.users/100), skus: skus}
	work := make(chan attempt, cfg.workers)
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				sh.st.attempt(tryBuy(ctx, sh, a))
				_ = bar.Add(1)
			}
		}()
	}
	start := time.Now()
	step := cfg.duration / time.Duration(cfg.attempts)
	for n := 0; n < cfg.attempts && ctx.Err() == nil; n++ {
		if wait := time.Until(start.Add(time.Duration(n) * step)); wait > time.Millisecond {
			_ = pause(ctx, wait)
		}
		work <- c.next(n)
	}
	close(work)
	wg.Wait()
	_ = bar.Finish()
	_, _ = io.WriteString(progress, "\n")
}

// tryBuy is one attempt: the per-user rate limit, then the order path.
func tryBuy(ctx context.Context, sh *shop, a attempt) (reason, time.Duration) {
	t0 := time.Now()
	d, err := sh.sys.users.Allow(ctx, a.user)
	switch {
	case err != nil:
		return reasonUnavailable, time.Since(t0)
	case !d.Allowed:
		return reasonRateLimited, time.Since(t0)
	}
	o := stock.Order{ID: "o" + strconv.Itoa(a.n), UserID: a.user, Items: []stock.Item{{SKU: a.sku, Qty: a.qty}}}
	r := sh.buy(ctx, o)
	return r, time.Since(t0)
}

// newBar returns the progress bar, drawn on w only when w is a terminal
// (a log file or a CI job gets no frames) and -quiet is not set.
func newBar(cfg config, w io.Writer) *progressbar.ProgressBar {
	if f, ok := w.(*os.File); cfg.quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		w = io.Discard
	}
	return progressbar.NewOptions(cfg.attempts,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("selling"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("attempts"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
	)
}
