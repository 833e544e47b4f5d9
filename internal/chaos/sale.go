package chaos

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// SaleConfig is the traffic of one sale: buyers placing orders of one to
// three SKUs, then paying, cancelling or walking away.
type SaleConfig struct {
	SKUs     []string
	Units    int64         // units per SKU put on sale
	Limit    int64         // per-user limit per SKU
	Hold     time.Duration // the gate's hold time
	Workers  int           // buyers placing orders at once
	Users    int           // distinct user IDs
	IDPrefix string        // order IDs are IDPrefix-n, unique per process
	// Timeout is the caller's deadline of one call.
	Timeout func(r *rand.Rand) time.Duration `json:"-"`
	// Retries is how often a call answered ErrUnknownOutcome is repeated
	// with the same order (the README's advice); 0 never.
	Retries   int
	RetryWait time.Duration
	// RetryFailed also repeats, up to Retries times, a Deduct answered
	// with an error that applied nothing (a plain failure, contention or
	// ErrBusy, unavailable), as a buyer does whose checkout failed in an
	// outage.
	RetryFailed bool
	// Bound is how long a call may take before it counts as late; zero
	// means its deadline plus one second.
	Bound time.Duration
	// PayShare and RevertShare split the buyers told yes: the rest never
	// pay and leave the hold to the reclaimer.
	PayShare, RevertShare float64
	Think                 time.Duration // pause between one buyer's orders
	Seed                  uint64
}

// Play runs the sale on m until ctx ends, recording every call in h, then
// waits for the calls under way (they run on their own deadlines, so a
// stopped sale cuts no call short).
func Play(ctx context.Context, m stock.Manager, cfg SaleConfig, h *History) {
	var seq atomic.Int64
	var wg, settles sync.WaitGroup
	sem := make(chan struct{}, 64)
	for w := range cfg.Workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			for ctx.Err() == nil {
				o := order(r, cfg, cfg.IDPrefix+"-"+strconv.FormatInt(seq.Add(1), 10))
				if Call(r, cfg, h, "deduct", o, func(c context.Context) error { return m.Deduct(c, o) }) == ClassOK {
					settles.Add(1)
					sem <- struct{}{}
					go func(seed uint64) {
						defer func() { <-sem; settles.Done() }()
						after(rand.New(rand.NewPCG(seed, 1)), m, cfg, h, o)
					}(r.Uint64())
				}
				if cfg.Think > 0 {
					time.Sleep(time.Duration(r.Int64N(int64(cfg.Think)) + 1))
				}
			}
		}(w)
	}
	wg.Wait()
	settles.Wait()
}

// order draws an order of one to three distinct SKUs, one or two units of
// each, for one of the users.
func order(r *rand.Rand, cfg SaleConfig, id string) stock.Order {
	n := 1 + r.IntN(min(3, len(cfg.SKUs)))
	perm := r.Perm(len(cfg.SKUs))[:n]
	o := stock.Order{ID: id, UserID: "u" + strconv.Itoa(r.IntN(cfg.Users))}
	for _, i := range perm {
		o.Items = append(o.Items, stock.Item{SKU: cfg.SKUs[i], Qty: 1 + r.Int64N(2)})
	}
	return o
}

// after is what a buyer told yes does: pays within the hold time (some
// too late), cancels, or never comes back.
func after(r *rand.Rand, m stock.Manager, cfg SaleConfig, h *History, o stock.Order) {
	switch p := r.Float64(); {
	case p < cfg.PayShare:
		time.Sleep(time.Duration(r.Int64N(int64(cfg.Hold) * 9 / 10)))
		Call(r, cfg, h, "confirm", o, func(c context.Context) error { return m.Confirm(c, o.ID) })
	case p < cfg.PayShare+cfg.RevertShare:
		time.Sleep(time.Duration(r.Int64N(int64(cfg.Hold) / 2)))
		Call(r, cfg, h, "revert", o, func(c context.Context) error { return m.Revert(c, o.ID) })
	}
}

// Call makes one call, repeating it after ErrUnknownOutcome as
// cfg.Retries says, records each attempt and returns the last class.
func Call(r *rand.Rand, cfg SaleConfig, h *History, op string, o stock.Order, f func(context.Context) error) string {
	for attempt := 0; ; attempt++ {
		d := cfg.Timeout(r)
		bound := cfg.Bound
		if bound == 0 {
			bound = d + time.Second
		}
		e := Event{Op: op, ID: o.ID, Attempt: attempt}
		if op == "deduct" && attempt == 0 {
			e.User, e.Items = o.UserID, o.Items
		}
		h.Add(e)
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		err := f(ctx)
		took := time.Since(start)
		cancel()
		e.User, e.Items = "", nil
		e.Class, e.Ms, e.Bound = Classify(err), ms(took), ms(bound)
		if err != nil {
			e.Err = err.Error()
		}
		h.Add(e)
		again := e.Class == ClassUnknown || e.Class == ClassMixed ||
			(cfg.RetryFailed && op == "deduct" && nothingApplied(e.Class))
		if !again || attempt >= cfg.Retries {
			return e.Class
		}
		time.Sleep(cfg.RetryWait)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
