package redisstock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/lua"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// pause holds one script call of one Deduct (the call whose context carries
// it, naming key among its arguments) until released.
type pause struct {
	key      string
	arrived  chan struct{}
	released chan struct{}
	once     sync.Once
}

type pauseCtxKey struct{}

func newPause(key string) *pause {
	return &pause{key: key, arrived: make(chan struct{}), released: make(chan struct{})}
}

func (p *pause) ctx(parent context.Context) context.Context {
	return context.WithValue(parent, pauseCtxKey{}, p)
}

// wait blocks until the paused call has arrived at the hook.
func (p *pause) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the paused call never arrived")
	}
}

func (p *pause) release() { close(p.released) }

// pauseHook holds the script calls that a pause in their context names.
type pauseHook struct{}

func (pauseHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (pauseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p, ok := ctx.Value(pauseCtxKey{}).(*pause); ok && names(cmd, p.key) {
			hit := false
			p.once.Do(func() { hit = true })
			if hit {
				close(p.arrived)
				<-p.released
			}
		}
		return next(ctx, cmd)
	}
}

func (pauseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// names reports whether cmd is a script call with key among its arguments.
func names(cmd redis.Cmder, key string) bool {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == key {
			return true
		}
	}
	return false
}

// resendHook sends a pipeline that carries a given script twice, as go-redis
// does when the first reply is lost (a read timeout): the caller sees the
// second run's replies only.
type resendHook struct {
	mu   sync.Mutex
	sha  string
	left int
}

func (h *resendHook) arm(script string, n int) {
	sum := sha1.Sum([]byte(lua.Script(script)))
	h.mu.Lock()
	h.sha, h.left = hex.EncodeToString(sum[:]), n
	h.mu.Unlock()
}

func (h *resendHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *resendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *resendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		armed := h.left > 0 && carries(cmds, h.sha)
		h.mu.Unlock()
		err := next(ctx, cmds)
		if !armed || noScriptIn(cmds) {
			return err
		}
		h.mu.Lock()
		h.left--
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func carries(cmds []redis.Cmder, sha string) bool {
	for _, c := range cmds {
		if args := c.Args(); c.Name() == "evalsha" && len(args) > 1 && args[1] == sha {
			return true
		}
	}
	return false
}

func noScriptIn(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// Two Deducts of one order ID on a Redis Cluster (a retry on another node
// while the first still runs): an undo removes only what its own attempt
// wrote, so the call that returns nil holds every line, Confirm works, the
// ID stays bound, and an order that fails in both leaves nothing held. An
// attempt refused while the other still holds a line of the order answers
// an unknown outcome, never the refusal (which would say nothing is held);
// the last to leave answers the refusal.
func TestClusterTwoAttemptsOfOneOrder(t *testing.T) {
	setup := func(t *testing.T, fx *fixture) (lo, hi string, o stock.Order) {
		fx.c.AddHook(pauseHook{})
		lo, hi = skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 1, 0, time.Minute)
		return lo, hi, ord("o1", "u1", it(lo, 2), it(hi, 2))
	}
	run := func(fx *fixture, p *pause, o stock.Order) <-chan error {
		done := make(chan error, 1)
		go func() { done <- fx.s.Deduct(p.ctx(fx.ctx()), o) }()
		return done
	}
	restock := func(t *testing.T, fx *fixture, sku string) {
		t.Helper()
		is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "more-" + sku, SKU: sku, Units: 1}), nil, "Restock")
	}

	t.Run("the retry fails, the first succeeds", func(t *testing.T) {
		eachCluster(t, func(t *testing.T, fx *fixture) {
			lo, hi, o := setup(t, fx)
			a := newPause(fx.s.LinesKey(hi))
			doneA := run(fx, a, o)
			a.wait(t) // A holds lo, and has not asked for hi yet
			unknown(t, fx.s.Deduct(fx.ctx(), o), "B, the retry, refused while A holds lo")
			restock(t, fx, hi)
			a.release()
			is(t, <-doneA, nil, "A")
			fx.want(lo, 8, 2, 0)
			fx.want(hi, 0, 2, 0)
			is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
			fx.want(lo, 8, 0, 2)
			fx.want(hi, 0, 0, 2)
		})
	})

	t.Run("the first fails, the retry succeeds", func(t *testing.T) {
		eachCluster(t, func(t *testing.T, fx *fixture) {
			lo, hi, o := setup(t, fx)
			key := fx.s.LinesKey(hi)
			a, b := newPause(key), newPause(key)
			doneA := run(fx, a, o)
			a.wait(t)
			doneB := run(fx, b, o)
			b.wait(t) // both hold lo (one hold), neither has hi
			a.release()
			unknown(t, <-doneA, "A, refused while B holds lo")
			restock(t, fx, hi)
			b.release()
			is(t, <-doneB, nil, "B")
			fx.want(lo, 8, 2, 0)
			fx.want(hi, 0, 2, 0)
			is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1))), stock.ErrConflict, "the ID with other items")
			is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm")
			fx.want(lo, 8, 0, 2)
			fx.want(hi, 0, 0, 2)
		})
	})

	t.Run("both fail", func(t *testing.T) {
		eachCluster(t, func(t *testing.T, fx *fixture) {
			lo, hi, o := setup(t, fx)
			key := fx.s.LinesKey(hi)
			a, b := newPause(key), newPause(key)
			doneA := run(fx, a, o)
			a.wait(t)
			doneB := run(fx, b, o)
			b.wait(t)
			a.release()
			unknown(t, <-doneA, "A, refused while B holds lo")
			b.release()
			is(t, <-doneB, stock.ErrSoldOut, "B, the last to leave")
			fx.want(lo, 10, 0, 0)
			fx.want(hi, 1, 0, 0)
			is(t, fx.s.Revert(fx.ctx(), "o1"), stock.ErrUnknownOrder, "Revert of the refused order")
			is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it(lo, 1))), nil, "the free ID with other items")
			fx.want(lo, 9, 1, 0)
		})
	})
}

// go-redis resends a pipeline whose reply timed out. A resent first
// pipeline of a Cluster Deduct finds the directory entry its first run
// wrote; a refused order must still free its ID.
func TestClusterResentFirstPipelineFreesTheID(t *testing.T) {
	// Batched, a single-line order goes through stock_deduct_hot.lua;
	// unbatched, through stock_deduct.lua.
	for maxBatch, script := range map[int]string{0: "stock_deduct_hot.lua", 1: "stock_deduct.lua"} {
		t.Run(script, func(t *testing.T) {
			eachCluster(t, func(t *testing.T, fx *fixture) {
				fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, MaxBatch: maxBatch})
				h := &resendHook{}
				fx.c.AddHook(h)
				fx.sale("a", 10, 0, time.Minute)
				fx.sale("b", 10, 0, time.Minute)
				h.arm(script, 1)
				is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 11))), stock.ErrSoldOut, "Deduct, resent")
				if h.left != 0 {
					t.Fatalf("no pipeline carried %s", script)
				}
				is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), nil, "the ID reused for other items")
				fx.want("a", 10, 0, 0)
				fx.want("b", 9, 1, 0)
			})
		})
	}
}

// go-redis resends a reclaim pipeline whose reply timed out: the second run
// finds nothing due, yet the pass must report the holds the first run
// returned (or fail); never an empty report and nil.
func TestReclaimReportSurvivesResend(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		h := &resendHook{}
		fx.c.AddHook(h)
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 2))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("o2", "u2", it("b", 3))), nil, "Deduct")
		fx.clock.Advance(time.Minute)
		h.arm("stock_reclaim.lua", 1)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil {
			t.Fatalf("ReclaimExpired: %v", err)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].OrderID < got[j].OrderID })
		want := []stock.Reclaimed{
			{OrderID: "o1", UserID: "u1", SKU: "a", Qty: 2},
			{OrderID: "o2", UserID: "u2", SKU: "b", Qty: 3},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ReclaimExpired with a resent pipeline = %+v, want %+v", got, want)
		}
		fx.want("a", 10, 0, 0)
		fx.want("b", 10, 0, 0)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("a second pass = %+v, %v; want nothing", got, err)
		}
	})
}

// A hold keeps its order's directory entry however late the reclaimer is:
// Revert still finds the order, and the ID stays bound to its items.
func TestDirectoryLivesAsLongAsTheHold(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct")
		// The reclaimer is down for longer than the default hold time and
		// Retention together.
		fx.mini.FastForward(stock.DefaultHoldTTL + 2*time.Hour)
		fx.clock.Advance(stock.DefaultHoldTTL + 2*time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), stock.ErrConflict, "the held ID with other items")
		fx.want("b", 10, 0, 0)
		is(t, fx.s.Revert(fx.ctx(), "o1"), nil, "Revert of the overdue hold")
		fx.want("a", 10, 0, 0)
		if got, err := fx.s.ReclaimExpired(fx.ctx(), 10); err != nil || len(got) != 0 {
			t.Fatalf("ReclaimExpired after the Revert = %+v, %v; want nothing", got, err)
		}
	})
}

// A late reclaim of an old hold never touches the directory entry of a
// newer order that names other items under the same ID.
func TestReclaimLeavesAnotherOrdersDirectory(t *testing.T) {
	eachMini(t, func(t *testing.T, fx *fixture) {
		fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, 3*time.Hour)
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("a", 1))), nil, "Deduct")
		// The entry is lost (evicted, deleted by hand), and the ID is
		// bound again, to other items.
		fx.delEntry("o1")
		is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u2", it("b", 1))), nil, "Deduct of the new order")
		fx.clock.Advance(2 * time.Minute)
		got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
		if err != nil || len(got) != 1 || got[0].SKU != "a" {
			t.Fatalf("ReclaimExpired = %+v, %v; want the old hold of a", got, err)
		}
		fx.mini.FastForward(time.Hour + time.Second)
		is(t, fx.s.Confirm(fx.ctx(), "o1"), nil, "Confirm of the new order")
		fx.want("a", 10, 0, 0)
		fx.want("b", 9, 0, 1)
	})
}

// A gate that lost a SKU's state (restart, flush) is unavailable for it,
// not a gate where it was never on sale: Deduct, Confirm and Revert answer
// stock.ErrUnavailable and change nothing. So does a gate that lost
// everything, registry included.
func TestGateThatLostItsDataIsUnavailable(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		fx.sale("a", 10, 0, time.Minute)
		fx.sale("b", 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it("a", 1), it("b", 1))), nil, "Deduct")
		is(t, fx.s.Deduct(fx.ctx(), ord("paid", "u1", it("a", 1))), nil, "Deduct")
		is(t, fx.s.Confirm(fx.ctx(), "paid"), nil, "Confirm")
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":{a}:state").Err(); err != nil {
			t.Fatal(err)
		}
		unavailable := func(err error, what string) {
			t.Helper()
			if !errors.Is(err, stock.ErrUnavailable) || stock.IsBusiness(err) || errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("%s: error %v, want stock.ErrUnavailable alone", what, err)
			}
		}
		unavailable(fx.s.Deduct(fx.ctx(), ord("new", "u2", it("a", 1))), "Deduct of the lost SKU")
		unavailable(fx.s.Deduct(fx.ctx(), ord("new2", "u2", it("b", 1), it("a", 1))), "Deduct naming the lost SKU")
		unavailable(fx.s.Confirm(fx.ctx(), "held"), "Confirm of an order of the lost SKU")
		unavailable(fx.s.Revert(fx.ctx(), "held"), "Revert of an order of the lost SKU")
		unavailable(fx.s.Revert(fx.ctx(), "paid"), "Refund of an order of the lost SKU")
		fx.want("b", 9, 1, 0)
		is(t, fx.s.Deduct(fx.ctx(), ord("new3", "u2", it("nope", 1))), stock.ErrUnknownSKU, "Deduct of a SKU never on sale")
		is(t, fx.s.Revert(fx.ctx(), "ghost"), stock.ErrUnknownOrder, "Revert of an unknown order")

		// The registry gone too: the Redis lost everything.
		if err := fx.c.Del(fx.ctx(), fx.cfg.Prefix+":skus").Err(); err != nil {
			t.Fatal(err)
		}
		unavailable(fx.s.Deduct(fx.ctx(), ord("new4", "u2", it("nope", 1))), "Deduct after the registry is gone")
		unavailable(fx.s.Revert(fx.ctx(), "ghost"), "Revert after the registry is gone")
		unavailable(fx.s.Confirm(fx.ctx(), "ghost"), "Confirm after the registry is gone")
		fx.want("b", 9, 1, 0)
	})
}

// One order, one deadline on a Redis Cluster too, whichever slot holds the
// SKU with the shorter hold time: Orders reports it, a repeat Deduct past
// it is expired and releases nothing, and the reclaimer returns every line.
func TestClusterOneDeadlinePerOrder(t *testing.T) {
	for _, shortFirst := range []bool{true, false} {
		name := "short hold in the later slot"
		if shortFirst {
			name = "short hold in the earlier slot"
		}
		t.Run(name, func(t *testing.T) {
			eachCluster(t, func(t *testing.T, fx *fixture) {
				short, long := skusInSlotOrder(t, fx)
				if !shortFirst {
					short, long = long, short
				}
				fx.sale(short, 10, 0, time.Minute)
				fx.sale(long, 10, 0, time.Hour)
				start := fx.clock.Now()
				o := ord("o1", "u1", it(long, 2), it(short, 1))
				is(t, fx.s.Deduct(fx.ctx(), o), nil, "Deduct")
				info, err := fx.s.Orders(fx.ctx(), []string{"o1"})
				if want := start.Add(time.Minute); err != nil || len(info) != 1 || !info[0].Deadline.Equal(want) {
					t.Fatalf("Orders = %+v, %v; want the deadline %v", info, err, want)
				}
				fx.clock.Advance(2 * time.Minute)
				is(t, fx.s.Deduct(fx.ctx(), o), stock.ErrHoldExpired, "repeat Deduct past the deadline")
				fx.want(short, 9, 1, 0)
				fx.want(long, 8, 2, 0)
				got, err := fx.s.ReclaimExpired(fx.ctx(), 10)
				if err != nil || len(got) != 2 {
					t.Fatalf("ReclaimExpired = %+v, %v; want both lines", got, err)
				}
				fx.want(short, 10, 0, 0)
				fx.want(long, 10, 0, 0)
				is(t, fx.s.Confirm(fx.ctx(), "o1"), stock.ErrHoldExpired, "Confirm of the reclaimed order")
			})
		})
	}
}

// A context already done before the call: nothing was sent, so the error
// is the context's, not an unknown outcome.
func TestCanceledContextSendsNothing(t *testing.T) {
	each(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		fx.sale(lo, 10, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		is(t, fx.s.Deduct(fx.ctx(), ord("held", "u1", it(lo, 1), it(hi, 1))), nil, "Deduct")
		ctx, cancel := context.WithCancel(fx.ctx())
		cancel()
		calls := map[string]error{
			"Deduct":          fx.s.Deduct(ctx, ord("o1", "u1", it(lo, 1))),
			"Deduct of slots": fx.s.Deduct(ctx, ord("o2", "u1", it(lo, 1), it(hi, 1))),
			"Confirm":         fx.s.Confirm(ctx, "held"),
			"Revert":          fx.s.Revert(ctx, "held"),
		}
		_, calls["ReclaimExpired"] = fx.s.ReclaimExpired(ctx, 10)
		for what, err := range calls {
			if !errors.Is(err, context.Canceled) || errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err) {
				t.Fatalf("%s with a canceled context: %v, want a plain context error", what, err)
			}
		}
		fx.want(lo, 9, 1, 0)
		fx.want(hi, 9, 1, 0)
		is(t, fx.s.Revert(fx.ctx(), "o2"), stock.ErrUnknownOrder, "Revert of the order never sent")
	})
}

// Many Deducts of the same order IDs at once on a Redis Cluster, while one
// SKU runs out and is restocked: every order told yes holds all its lines
// and confirms, every other order leaves nothing held and its ID free, and
// the counts are exact. A try refused while another try of its order still
// holds a line answers an unknown outcome; every order gets a definitive
// answer (nil, or sold out from the last try to leave) from some try.
func TestClusterConcurrentAttemptsExactCounts(t *testing.T) {
	eachCluster(t, func(t *testing.T, fx *fixture) {
		lo, hi := skusInSlotOrder(t, fx)
		const orders, tries, restocks = 40, 3, 10
		fx.sale(lo, orders, 0, time.Minute)
		fx.sale(hi, 10, 0, time.Minute)
		var mu sync.Mutex
		yes, told := map[string]bool{}, map[string]bool{}
		var wg sync.WaitGroup
		for i := range orders {
			id := "o" + strconv.Itoa(i)
			for range tries {
				wg.Go(func() {
					err := fx.s.Deduct(fx.ctx(), ord(id, "u", it(lo, 1), it(hi, 1)))
					switch {
					case err == nil, errors.Is(err, stock.ErrSoldOut) && !errors.Is(err, stock.ErrUnknownOutcome):
						mu.Lock()
						yes[id] = yes[id] || err == nil
						told[id] = true
						mu.Unlock()
					case !errors.Is(err, stock.ErrUnknownOutcome) || stock.IsBusiness(err):
						t.Errorf("Deduct %s: %v", id, err)
					}
				})
			}
		}
		for i := range restocks {
			wg.Go(func() {
				is(t, fx.s.Restock(fx.ctx(), stock.Restock{OpID: "r" + strconv.Itoa(i), SKU: hi, Units: 1}), nil, "Restock")
			})
		}
		wg.Wait()
		if len(told) != orders {
			t.Fatalf("%d of %d orders got a definitive answer from some try", len(told), orders)
		}
		n := int64(0)
		for _, y := range yes {
			if y {
				n++
			}
		}
		fx.want(lo, orders-n, n, 0)
		fx.want(hi, 10+restocks-n, n, 0)
		for i := range orders {
			id := "o" + strconv.Itoa(i)
			if yes[id] {
				is(t, fx.s.Confirm(fx.ctx(), id), nil, "Confirm of "+id)
			} else {
				is(t, fx.s.Revert(fx.ctx(), id), stock.ErrUnknownOrder, "Revert of the refused "+id)
			}
		}
		fx.want(lo, orders-n, 0, n)
		fx.want(hi, 10+restocks-n, 0, n)
	})
}

// An attempt whose reply was lost after it bound the order ID and took
// nothing, then a refused retry: the ID is not bound forever.
func TestClusterAbandonedAttemptDoesNotBindTheIDForever(t *testing.T) {
	for _, b := range backends() {
		if b.name != "miniredis-cluster" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			fx := newFixture(t, b)
			fx.s = newStore(t, fx.c, redisstock.Config{Prefix: fx.cfg.Prefix, Clock: fx.clock, Retention: time.Hour})
			fx.sale("a", 10, 0, time.Minute)
			fx.sale("b", 10, 0, time.Minute)
			o := ord("o1", "u1", it("a", 11))
			fx.hook.arm(0, 1, false)
			unknown(t, fx.s.Deduct(fx.ctx(), o), "Deduct with a lost reply")
			is(t, fx.s.Deduct(fx.ctx(), o), stock.ErrSoldOut, "the retry")
			elapse(fx, stock.DefaultHoldTTL+time.Hour+time.Second)
			is(t, fx.s.Deduct(fx.ctx(), ord("o1", "u1", it("b", 1))), nil, "the ID reused for other items")
			fx.want("a", 10, 0, 0)
			fx.want("b", 9, 1, 0)
		})
	}
}
