package chaos

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// Options configure a run of the matrix.
type Options struct {
	DB   DB
	Dir  string // where servers keep their files; "" the system's temp dir
	Long bool   // a longer sale per cell (30s instead of 3s)
	// Self is the executable the app-kill cell starts as the application
	// (it must call ChildMain when ChildEnv is set); "" is os.Executable.
	Self string
	Logf func(format string, args ...any)
	// StripUnknown wires every cell's record with StackConfig.StripUnknown.
	StripUnknown bool
}

// Result is one cell of the matrix on one database.
type Result struct {
	Cell string
	DB   string
	M    Measures
	Took time.Duration
	Err  error // the harness could not run the cell
}

// Env is what a cell's hooks work on: the processes, proxies and node of
// one run.
type Env struct {
	Opts     Options
	Dir      string
	Redis    *Server // the gate's master at the start
	Replica  *Server
	Sentinel *Server
	Proxy    *Proxy // in front of Redis, when a cell wants one
	Link     *Proxy // between the replica and its master
	DBProxy  *Proxy // in front of the database
	Stack    *Stack
	Config   StackConfig
	Sale     SaleConfig
	SaleFor  time.Duration
	History  *History
	Rand     *mrand.Rand

	cleanup []func()
}

// Defer runs f when the cell ends, the last registered first.
func (e *Env) Defer(f func()) { e.cleanup = append(e.cleanup, f) }

func (e *Env) logf(format string, args ...any) {
	if e.Opts.Logf != nil {
		e.Opts.Logf(format, args...)
	}
}

func token(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// discard silences go-redis's log of dial failures (and the MySQL
// driver's of cut connections), which the faults cause by the hundred.
type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

var quiet sync.Once

// RunCell plays one cell on opts.DB.
func RunCell(c Cell, opts Options) (res Result) {
	quiet.Do(func() {
		redis.SetLogger(discard{})
		_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	})
	start := time.Now()
	res = Result{Cell: c.Name, DB: opts.DB.Name}
	if c.NeedsTCP && opts.DB.Driver == "sqlite" {
		res.Err = errors.New("needs a database behind TCP")
		return res
	}
	env, err := newEnv(c, opts)
	if env != nil {
		env.logf("%s/%s: set up in %v", c.Name, opts.DB.Name, time.Since(start).Round(10*time.Millisecond))
	}
	if env != nil {
		defer func() {
			for i := len(env.cleanup) - 1; i >= 0; i-- {
				env.cleanup[i]()
			}
			res.Took = time.Since(start)
		}()
	}
	if err != nil {
		res.Err = err
		return res
	}
	res.M, res.Err = env.run(c)
	return res
}

func newEnv(c Cell, opts Options) (*Env, error) {
	dir, err := os.MkdirTemp(opts.Dir, "chaos-"+c.Name+"-")
	if err != nil {
		return nil, err
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	env := &Env{Opts: opts, Dir: dir, SaleFor: 3 * time.Second,
		Rand: mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:]), 7))}
	env.Defer(func() { _ = os.RemoveAll(dir) })
	if opts.Long {
		env.SaleFor = 30 * time.Second
	}
	if env.Redis, err = StartRedis(dir); err != nil {
		return env, err
	}
	env.Defer(func() { env.Redis.Kill() })
	tag := "cx" + token(5)
	db := opts.DB
	if db.Driver == "sqlite" {
		db.DSN = filepath.Join(dir, "stock.db") // one file per cell
	}
	env.Config = StackConfig{RedisAddr: env.Redis.Addr(), DB: db, Table: tag + "_s", Ledger: tag + "_l",
		Prefix: tag, Hold: time.Second, Grace: time.Second}
	env.Sale = SaleConfig{SKUs: []string{"hot", "b", "c", "d"}, Units: 100, Limit: 2, Hold: time.Second,
		Workers: 6, Users: 80, IDPrefix: tag, PayShare: 0.6, RevertShare: 0.2, Think: 10 * time.Millisecond,
		Timeout: func(*mrand.Rand) time.Duration { return 500 * time.Millisecond }, Seed: env.Rand.Uint64()}
	if f := int64(env.SaleFor / (3 * time.Second)); f > 1 {
		// A longer sale gets as much more stock and as many more buyers,
		// so it is not sold out after the first seconds.
		env.Sale.Units *= f
		env.Sale.Users *= int(f)
	}
	if env.History, err = NewHistory(""); err != nil {
		return env, err
	}
	env.Config.History = env.History
	env.Config.StripUnknown = opts.StripUnknown
	if c.Setup != nil {
		if err := c.Setup(env); err != nil {
			return env, fmt.Errorf("setup: %w", err)
		}
	}
	return env, nil
}

// direct opens the run's record on a pool that no proxy cuts: the
// harness's own reads, table creation and the final reconcile.
func (e *Env) direct() (*sqlstock.Store, error) {
	db, err := e.Config.DB.Open("", 4)
	if err != nil {
		return nil, err
	}
	e.Defer(func() { _ = db.Close() })
	return sqlstock.New(db.DB, sqlstock.Config{Dialect: e.Config.DB.Dialect, Table: e.Config.Table, Ledger: e.Config.Ledger})
}

func (e *Env) run(c Cell) (Measures, error) {
	rec, err := e.direct()
	if err != nil {
		return Measures{}, err
	}
	ctx := context.Background()
	if err := rec.CreateTables(ctx); err != nil {
		return Measures{}, err
	}
	e.Defer(func() {
		db, err := e.Config.DB.Open("", 1)
		if err == nil {
			_ = dropTables(context.Background(), db, rec.Tables())
			_ = db.Close()
		}
	})
	if e.Stack, err = Build(e.Config); err != nil {
		return Measures{}, err
	}
	e.Defer(func() { _ = e.Stack.Close() })
	for _, sku := range e.Sale.SKUs {
		l := stock.Listing{SKU: sku, Units: e.Sale.Units, PerUserLimit: e.Sale.Limit, HoldTTL: e.Sale.Hold}
		if err := e.Stack.Tiered.PutOnSale(ctx, l); err != nil {
			return Measures{}, fmt.Errorf("put on sale: %w", err)
		}
	}

	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	background(bg, &wg, e.Stack)

	var events []Event
	if c.Play != nil {
		if events, err = c.Play(e); err != nil {
			stopBG()
			wg.Wait()
			return Measures{}, err
		}
	} else {
		sale, stop := context.WithTimeout(ctx, e.SaleFor)
		var fw sync.WaitGroup
		if c.Fault != nil {
			fw.Add(1)
			go func() { defer fw.Done(); c.Fault(sale, e) }()
		}
		Play(sale, e.Stack.Top, e.Sale, e.History)
		stop()
		fw.Wait()
		events = e.History.Events()
	}
	if c.Heal != nil {
		c.Heal(e)
	}
	// Every deadline passes (gate hold, then the record's grace) while the
	// reclaimers and the reconciler still run, then they stop and the
	// harness drains what is left.
	callctx.Sleep(ctx, e.Sale.Hold+e.Config.Grace+500*time.Millisecond)
	stopBG()
	wg.Wait()
	return e.finish(ctx, rec, events)
}

// background runs a node's reclaimer, reconciler and repairs (Shop.Run)
// until ctx ends.
func background(ctx context.Context, wg *sync.WaitGroup, s *Stack) {
	wg.Go(func() { _ = s.Shop.Run(ctx) })
}

// finish drains the reclaimers, measures drift, reconciles, measures again
// and computes the cell's figures.
func (e *Env) finish(ctx context.Context, rec *sqlstock.Store, events []Event) (Measures, error) {
	top := e.Stack.Top
	var lastErr error
	for i := 0; i < 30; i++ {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		got, err := top.ReclaimExpired(c, 256)
		cancel()
		if err == nil && len(got) == 0 {
			lastErr = nil
			break
		}
		lastErr = err
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if lastErr != nil {
		e.logf("final reclaim: %v", lastErr)
	}
	before, err := Drift(ctx, e.Sale.SKUs, e.Stack.Gate, rec)
	if err != nil {
		return Measures{}, err
	}
	r, err := reconcile.New(e.Stack.Gate, rec, reconcile.Config{GateHold: e.Stack.Tiered.GateHold, MaxAutoFix: -1}) // the record on a pool no proxy cuts
	if err != nil {
		return Measures{}, err
	}
	for i := 0; i < 3; i++ {
		if _, err = r.RepairAll(ctx); err == nil {
			break
		}
	}
	if err != nil {
		e.logf("final reconcile: %v", err)
	}
	after, err := Drift(ctx, e.Sale.SKUs, e.Stack.Gate, rec)
	if err != nil {
		return Measures{}, err
	}
	m, err := Measure(ctx, events, e.Sale, rec, e.Stack.Gate)
	m.DriftBefore, m.DriftAfter = before, after
	if lastErr != nil {
		m.note("final reclaim: %v", lastErr)
	}
	return m, errors.Join(err)
}
