package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/callctx"
	"github.com/stockguard/stockguard/stock/stocktest"
)

// Cell is one scenario of the matrix: hooks around a sale.
type Cell struct {
	Name  string
	About string // what the fault is, for the table
	// Setup changes the processes and the wiring before the node is built.
	Setup func(e *Env) error
	// Fault runs during the sale and returns when ctx ends.
	Fault func(ctx context.Context, e *Env)
	// Heal undoes what is left of the fault after the sale.
	Heal func(e *Env)
	// NeedsTCP: the cell hurts the database's connections or locks, so
	// it runs on MariaDB and PostgreSQL, not SQLite.
	NeedsTCP bool
	// Play replaces the in-process sale (the app-kill cell plays it in
	// child processes) and returns its history.
	Play func(e *Env) ([]Event, error)
}

// gap is the pause before (and between) a cell's faults.
func (e *Env) gap() time.Duration {
	if e.Opts.Long {
		return 5 * time.Second
	}
	return time.Second
}

// Cells are the scenarios, in the order the table lists them.
func Cells() []Cell {
	return []Cell{
		{Name: "control", About: "no fault"},
		{Name: "redis-kill", About: "Redis killed with -9 and restarted empty, every gap", Fault: killRedis, Heal: reviveRedis},
		{Name: "lagging-failover", About: "replica frozen 300ms, promoted, proxy switched to it, old master killed",
			Setup: setupFailover, Fault: failover, Heal: func(e *Env) { e.Link.Resume() }},
		{Name: "sentinel-failover", About: "master killed with -9, Sentinel promotes the replica (go-redis failover client)",
			Setup: setupSentinel, Fault: func(ctx context.Context, e *Env) {
				if callctx.Sleep(ctx, e.gap()) {
					e.Redis.Kill()
				}
			}, Heal: waitPromoted},
		{Name: "flushall", About: "FLUSHALL twice mid-sale", Fault: flushTwice},
		{Name: "pause", About: "CLIENT PAUSE 400ms every 700ms, 150ms caller deadlines, no retries",
			Setup: pauseSetup(0), Fault: pauseRedis},
		{Name: "pause-retry", About: "the same, callers retry ErrUnknownOutcome with the same ID up to 6 times",
			Setup: pauseSetup(6), Fault: pauseRedis},
		{Name: "degrade", About: "Redis down 1.5s then back empty, the Shop's breaker opening; buyers retry a failed checkout with the same order",
			Setup: setupDegrade, Fault: downRedis, Heal: reviveRedis},
		{Name: "handoff-crash", About: "faults at each gate/record hand-off (stocktest.Faulty), 25% of calls with 1-4ms deadlines",
			Setup: setupHandoff, Fault: handoffFaults, Heal: func(e *Env) {
				e.Stack.GateF.SetFault(stocktest.Healthy)
				e.Stack.RecordF.SetFault(stocktest.Healthy)
			}},
		{Name: "app-kill", About: "the application killed with -9 three times, a fresh process taking over", Play: playAppKill},
		{Name: "sql-cut", About: "SQL replies dropped after the request went through (20% of COMMITs, 1% of all)",
			Setup: setupSQLCut, Fault: cutSQL, NeedsTCP: true},
		{Name: "lock-storm", About: "a transaction holds the hot rows FOR UPDATE 3s at a time (200ms gaps); sqlstock LockWait 1s, caller deadline 5s, bound 3.5s per call (sqlstock's AnswerBound, three lock waits, and round trips)",
			Setup: setupLockStorm, Fault: lockStorm, NeedsTCP: true},
	}
}

func killRedis(ctx context.Context, e *Env) {
	for callctx.Sleep(ctx, e.gap()) {
		e.Redis.Kill()
		time.Sleep(300 * time.Millisecond)
		if err := e.Redis.Start(); err != nil {
			e.logf("restart redis: %v", err)
		}
	}
}

func downRedis(ctx context.Context, e *Env) {
	for callctx.Sleep(ctx, e.gap()) {
		e.Redis.Kill()
		time.Sleep(1500 * time.Millisecond)
		if err := e.Redis.Start(); err != nil {
			e.logf("restart redis: %v", err)
		}
	}
}

// setupDegrade lets the breaker open, and has buyers retry a Deduct that
// failed with nothing applied (before the breaker opened, or refused as
// busy by the fallback's rate): every buyer whose first attempt failed
// must be able to buy on a retry once the breaker is open. A buyer retries
// for about 10s (100 retries 100ms apart): the breaker's recalibration
// once Redis is back took less than the 0.8s of 8 retries on a quiet
// machine and outlasted them on 2 cores shared with 8 busy processes; 10s
// is the margin the cell does not control.
func setupDegrade(e *Env) error {
	e.Config.Degrade = true
	e.Sale.RetryFailed, e.Sale.Retries, e.Sale.RetryWait = true, 100, 100*time.Millisecond
	return nil
}

func reviveRedis(e *Env) {
	if !e.Redis.Alive() {
		if err := e.Redis.Start(); err != nil {
			e.logf("restart redis: %v", err)
		}
	}
}

func setupFailover(e *Env) error {
	var err error
	if e.Link, err = NewProxy(e.Redis.Addr()); err != nil {
		return err
	}
	e.Defer(func() { _ = e.Link.Close() })
	_, port, _ := splitPort(e.Link.Addr())
	if e.Replica, err = StartRedis(e.Dir, "--replicaof", "127.0.0.1", port); err != nil {
		return err
	}
	e.Defer(e.Replica.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Replica.WaitSynced(ctx); err != nil {
		return err
	}
	if e.Proxy, err = NewProxy(e.Redis.Addr()); err != nil {
		return err
	}
	e.Defer(func() { _ = e.Proxy.Close() })
	e.Config.RedisAddr = e.Proxy.Addr()
	return nil
}

func failover(ctx context.Context, e *Env) {
	if !callctx.Sleep(ctx, e.gap()) {
		return
	}
	e.Link.Pause()
	time.Sleep(300 * time.Millisecond)
	c := e.Replica.Client()
	defer c.Close()
	m := e.Redis.Client()
	mo, merr := offset(m, "master_repl_offset")
	ro, rerr := offset(c, "master_repl_offset")
	_ = m.Close()
	if merr == nil && rerr == nil {
		e.logf("lagging-failover: the replica is %d bytes of writes behind when promoted", mo-ro)
	}
	if err := c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		e.logf("promote: %v", err)
	}
	e.Proxy.SetUpstream(e.Replica.Addr())
	e.Proxy.CutAll()
	e.Redis.Kill()
}

// offset reads a replication offset from INFO replication.
func offset(c *redis.Client, field string) (int64, error) {
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("chaos: no " + field + " in INFO")
}

func setupSentinel(e *Env) error {
	var err error
	if e.Replica, err = StartRedis(e.Dir, "--replicaof", "127.0.0.1", strconv.Itoa(e.Redis.Port)); err != nil {
		return err
	}
	e.Defer(e.Replica.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.Replica.WaitSynced(ctx); err != nil {
		return err
	}
	if e.Sentinel, err = StartSentinel(e.Dir, "chaos", e.Redis.Port, 400*time.Millisecond); err != nil {
		return err
	}
	e.Defer(e.Sentinel.Kill)
	c := e.Sentinel.Client()
	defer c.Close()
	for {
		reps, err := c.Do(ctx, "SENTINEL", "REPLICAS", "chaos").Slice()
		if err == nil && len(reps) > 0 {
			break
		}
		if !callctx.Sleep(ctx, 100*time.Millisecond) {
			return errors.New("chaos: Sentinel did not see the replica")
		}
	}
	e.Config.SentinelMaster, e.Config.SentinelAddrs = "chaos", []string{e.Sentinel.Addr()}
	e.SaleFor = max(e.SaleFor, 5*time.Second)
	return nil
}

// waitPromoted waits until Sentinel names the replica as the master.
func waitPromoted(e *Env) {
	c := e.Sentinel.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		addr, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "chaos").StringSlice()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(e.Replica.Port) {
			return
		}
		if !callctx.Sleep(ctx, 100*time.Millisecond) {
			e.logf("Sentinel did not promote the replica: %v %v", addr, err)
			return
		}
	}
}

func flushTwice(ctx context.Context, e *Env) {
	c := e.Redis.Client()
	defer c.Close()
	for i := 0; e.Opts.Long || i < 2; i++ {
		if !callctx.Sleep(ctx, e.gap()) {
			return
		}
		if err := c.FlushAll(context.Background()).Err(); err != nil {
			e.logf("flushall: %v", err)
		}
	}
}

func pauseSetup(retries int) func(e *Env) error {
	return func(e *Env) error {
		e.Sale.Timeout = func(*mrand.Rand) time.Duration { return 150 * time.Millisecond }
		e.Sale.Retries, e.Sale.RetryWait = retries, 100*time.Millisecond
		return nil
	}
}

func pauseRedis(ctx context.Context, e *Env) {
	c := e.Redis.Client()
	defer c.Close()
	for callctx.Sleep(ctx, 700*time.Millisecond) {
		if err := c.Do(context.Background(), "CLIENT", "PAUSE", "400", "ALL").Err(); err != nil {
			e.logf("client pause: %v", err)
		}
	}
}

func setupHandoff(e *Env) error {
	e.Config.Faulty = true
	e.Sale.Timeout = func(r *mrand.Rand) time.Duration {
		if r.IntN(4) == 0 {
			return time.Duration(1+r.IntN(4)) * time.Millisecond
		}
		return 500 * time.Millisecond
	}
	return nil
}

// handoffFaults opens 40ms windows of one fault at a time. A tier's first
// step of a call only ever fails Down (a store that sent a write reports
// ErrUnknownOutcome itself); the second tier of a call also loses replies
// after applying them: a crash between gate and record.
func handoffFaults(ctx context.Context, e *Env) {
	type window struct {
		f       *stocktest.Faulty
		x       stocktest.Fault
		methods []string
	}
	ws := []window{
		{e.Stack.RecordF, stocktest.Down, []string{"Deduct", "Confirm", "Revert"}},
		{e.Stack.RecordF, stocktest.LostReply, []string{"Deduct", "Revert"}},
		{e.Stack.GateF, stocktest.Down, []string{"Deduct", "Confirm", "Revert"}},
		{e.Stack.GateF, stocktest.LostReply, []string{"Confirm"}},
	}
	for callctx.Sleep(ctx, 60*time.Millisecond) {
		w := ws[e.Rand.IntN(len(ws))]
		w.f.SetFaultFor(w.x, stocktest.OnMethod(w.methods...))
		callctx.Sleep(ctx, 40*time.Millisecond)
		w.f.SetFault(stocktest.Healthy)
	}
}

func setupSQLCut(e *Env) error {
	addr, err := e.Config.DB.Addr()
	if err != nil {
		return err
	}
	if e.DBProxy, err = NewProxy(addr); err != nil {
		return err
	}
	e.Defer(func() { _ = e.DBProxy.Close() })
	e.Config.DBAddr = e.DBProxy.Addr()
	return nil
}

func cutSQL(ctx context.Context, e *Env) {
	commit := []byte("commit")
	commits, any := 0.2, 0.01
	if e.Config.StripUnknown {
		// Enough cuts that the record's re-reads fail too and it has to
		// answer ErrUnknownOutcome (which the strip then hides).
		commits, any = 0.5, 0.2
	}
	e.DBProxy.DropReplies(func(b []byte) bool {
		if bytes.Contains(bytes.ToLower(b), commit) {
			return mrand.Float64() < commits
		}
		return mrand.Float64() < any
	})
	<-ctx.Done()
	e.DBProxy.DropReplies(nil)
	e.logf("sql-cut: %d replies dropped", e.DBProxy.Dropped())
}

func setupLockStorm(e *Env) error {
	// Whole seconds: MySQL and MariaDB take no less. A call must answer
	// (ErrContention is an answer) before the adversary lets go: within
	// the bound sqlstock documents (Store.AnswerBound: two lock waits for
	// a call that applied nothing, a third to learn an unknown outcome)
	// and round trips.
	e.Config.LockWait = time.Second
	e.Sale.Timeout = func(*mrand.Rand) time.Duration { return 5 * time.Second }
	e.Sale.Bound = 3*e.Config.LockWait + 500*time.Millisecond
	return nil
}

// lockStorm runs an adversary that holds the hot rows' locks for 3s at a
// time, letting go for 200ms in between.
func lockStorm(ctx context.Context, e *Env) {
	db, err := e.Config.DB.Open("", 1)
	if err != nil {
		e.logf("lock storm: %v", err)
		return
	}
	defer db.Close()
	q := fmt.Sprintf("SELECT sku FROM %s WHERE sku IN ('hot', 'b') FOR UPDATE", e.Config.Table)
	for ctx.Err() == nil {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tx, err := db.BeginTx(c, nil)
		if err == nil {
			rows, qerr := tx.QueryContext(c, q)
			if qerr == nil {
				_ = rows.Close()
			}
			callctx.Sleep(ctx, 3*time.Second)
			_ = tx.Commit()
		}
		cancel()
		callctx.Sleep(ctx, 200*time.Millisecond)
	}
}

func splitPort(addr string) (host, port string, err error) {
	i := bytes.LastIndexByte([]byte(addr), ':')
	if i < 0 {
		return "", "", errors.New("chaos: no port in " + addr)
	}
	return addr[:i], addr[i+1:], nil
}
