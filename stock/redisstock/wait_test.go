package redisstock_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/chaos"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

// replicated is a master of this test's own and its replica, linked
// through a proxy the test can freeze (the replica neither receives nor
// acknowledges while it is paused) or cut.
type replicated struct {
	master, replica *chaos.Server
	link            *chaos.Proxy
}

// needRedisServer skips t, with a message, where redis-server is not
// installed.
func needRedisServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not on the PATH")
	}
}

// startMaster starts a redis-server of the test's own on a free port.
func startMaster(t testing.TB, extra ...string) *chaos.Server {
	t.Helper()
	needRedisServer(t)
	m, err := chaos.StartRedis(t.TempDir(), extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Kill)
	return m
}

// startReplicated starts a master and a replica of it through a proxy,
// and waits until the replica is synced.
func startReplicated(t testing.TB, replicaExtra ...string) *replicated {
	t.Helper()
	m := startMaster(t)
	link, err := chaos.NewProxy(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		link.CutAll() // before Close resumes a paused link: nothing more reaches the replica
		_ = link.Close()
	})
	host, port, _ := strings.Cut(link.Addr(), ":")
	r, err := chaos.StartRedis(t.TempDir(), append([]string{"--replicaof", host, port}, replicaExtra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	// The master streams writes to a replica once it acknowledged the
	// sync (up to a second after it): wait until a write reaches it.
	mc := waitClient(t, m.Addr())
	p := mc.Pipeline()
	p.Set(ctx, "harness:ready", 1, 0)
	n := p.Do(ctx, "WAIT", 1, 5000)
	if _, err := p.Exec(ctx); err != nil || n.Val() != int64(1) {
		t.Fatalf("the replica does not acknowledge: %v %v", n.Val(), err)
	}
	return &replicated{master: m, replica: r, link: link}
}

// waitClient is a client of the test's own server; it does not retry, so
// a request lost with a killed server answers its own error.
func waitClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// commandCalls returns how many times the server ran cmd (INFO
// commandstats).
func commandCalls(t testing.TB, c *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

func levels(t testing.TB, s *redisstock.Store, sku string) stock.Levels {
	t.Helper()
	l, err := s.Levels(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWaitFailoverKeepsAcknowledgedHolds: with WaitReplicas 1, every
// Deduct that answered nil is on the replica, so after the master dies and
// the replica is promoted each acknowledged hold is there, exact, and can
// be confirmed; orders that never got their acknowledgement are retried
// on the new master and taken once.
func TestWaitFailoverKeepsAcknowledgedHolds(t *testing.T) {
	r := startReplicated(t)
	ctx := context.Background()
	prefix := uniquePrefix(t)
	s := newStore(t, waitClient(t, r.master.Addr()), redisstock.Config{Prefix: prefix, WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	const units = 1000
	for _, sku := range []string{"a", "b"} {
		if err := s.PutOnSale(ctx, stock.Listing{SKU: sku, Units: units, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	order := func(i int) stock.Order {
		o := stock.Order{ID: "o" + strconv.Itoa(i), UserID: "u" + strconv.Itoa(i%7), Items: []stock.Item{{SKU: "a", Qty: int64(1 + i%3)}}}
		if i%2 == 0 {
			o.Items = append(o.Items, stock.Item{SKU: "b", Qty: 1})
		}
		return o
	}
	deduct := func(from, to int) map[int]error {
		var mu sync.Mutex
		out := map[int]error{}
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Go(func() {
				err := s.Deduct(ctx, order(i))
				mu.Lock()
				out[i] = err
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}

	// The link is up: every Deduct is acknowledged.
	var acked []int
	for i, err := range deduct(0, 40) {
		if err != nil {
			t.Fatalf("Deduct %d with the replica up: %v", i, err)
		}
		acked = append(acked, i)
	}
	// The link freezes: the next Deducts reach the master but not the
	// replica, and must not answer nil. Then the master dies with them.
	r.link.Pause()
	var late map[int]error
	done := make(chan struct{})
	go func() { late = deduct(40, 60); close(done) }()
	time.Sleep(300 * time.Millisecond)
	r.master.Kill()
	r.link.CutAll()
	<-done
	var unacked []int
	for i, err := range late {
		if err == nil {
			acked = append(acked, i) // a wait that was skipped: the check below finds it lost
			continue
		}
		unacked = append(unacked, i)
	}

	// Failover: the replica becomes the master.
	rc := waitClient(t, r.replica.Addr())
	if err := rc.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, rc, redisstock.Config{Prefix: prefix})
	want := map[string]int64{}
	var ids []string
	for _, i := range acked {
		for _, it := range order(i).Items {
			want[it.SKU] += it.Qty
		}
		ids = append(ids, order(i).ID)
	}
	for _, sku := range []string{"a", "b"} {
		l := levels(t, s2, sku)
		if l.Held != want[sku] || l.Available != units-want[sku] || l.Sold != 0 {
			t.Fatalf("SKU %s on the promoted replica: %+v; want %d held of %d acknowledged (%d orders)", sku, l, want[sku], units, len(acked))
		}
	}
	infos, err := s2.Orders(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for k, info := range infos {
		if info.State != stock.StateHeld {
			t.Fatalf("acknowledged order %s on the promoted replica: %v", ids[k], info.State)
		}
	}
	for _, id := range ids {
		if err := s2.Confirm(ctx, id); err != nil {
			t.Fatalf("Confirm %s on the promoted replica: %v", id, err)
		}
	}
	// The orders without an acknowledgement are the callers' to retry.
	for _, i := range unacked {
		if err := s2.Deduct(ctx, order(i)); err != nil {
			t.Fatalf("retry of Deduct %d on the new master: %v", i, err)
		}
		for _, it := range order(i).Items {
			want[it.SKU] += it.Qty
		}
	}
	for _, sku := range []string{"a", "b"} {
		if l := levels(t, s2, sku); l.Available != units-want[sku] {
			t.Fatalf("SKU %s after the retries: %+v, want %d available", sku, l, units-want[sku])
		}
	}
	if len(unacked) == 0 {
		t.Fatal("no Deduct waited while the link was frozen")
	}
}

// TestWaitTooFewAcknowledgements: a Deduct (and a Confirm) whose write the
// replica cannot acknowledge answers stock.ErrUnknownOutcome after about
// WaitTimeout; its retry, once the replica is back, answers nil and the
// stock is taken once.
func TestWaitTooFewAcknowledgements(t *testing.T) {
	r := startReplicated(t)
	ctx := context.Background()
	const timeout = 300 * time.Millisecond
	prefix := uniquePrefix(t)
	s := newStore(t, waitClient(t, r.master.Addr()), redisstock.Config{Prefix: prefix, WaitReplicas: 1, WaitTimeout: timeout})
	if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 3}}}

	short := func(what string, call func() error) {
		t.Helper()
		r.link.Pause()
		defer r.link.Resume()
		start := time.Now()
		err := call()
		took := time.Since(start)
		var rerr *redisstock.ReplicationError
		if !errors.Is(err, stock.ErrUnknownOutcome) || !errors.As(err, &rerr) || rerr.Acked != 0 || rerr.Want != 1 {
			t.Fatalf("%s with the replica frozen: %v, want ErrUnknownOutcome (0 of 1 replicas)", what, err)
		}
		if took < timeout || took > timeout+time.Second {
			t.Fatalf("%s with the replica frozen answered after %v, want about %v", what, took, timeout)
		}
	}
	short("Deduct", func() error { return s.Deduct(ctx, o) })
	if err := s.Deduct(ctx, o); err != nil {
		t.Fatalf("retry of Deduct with the replica back: %v", err)
	}
	if l := levels(t, s, "a"); l.Held != 3 || l.Available != 7 {
		t.Fatalf("after the retry: %+v, want 3 held, 7 available", l)
	}
	short("Confirm", func() error { return s.Confirm(ctx, o.ID) })
	if err := s.Confirm(ctx, o.ID); err != nil {
		t.Fatalf("retry of Confirm with the replica back: %v", err)
	}
	if l := levels(t, s, "a"); l.Held != 0 || l.Sold != 3 || l.Available != 7 {
		t.Fatalf("after the confirmation: %+v, want 3 sold, 7 available", l)
	}
	// The replica has it all.
	rs := newStore(t, waitClient(t, r.replica.Addr()), redisstock.Config{Prefix: prefix})
	if l := levels(t, rs, "a"); l.Sold != 3 || l.Available != 7 {
		t.Fatalf("on the replica: %+v, want 3 sold, 7 available", l)
	}

	// A master with no replica at all never acknowledges.
	lone := newStore(t, waitClient(t, startMaster(t).Addr()), redisstock.Config{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	if err := lone.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}); !errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("PutOnSale on a master without replicas: %v, want ErrUnknownOutcome", err)
	}
}

// TestWaitAOF: WaitAOF waits with WAITAOF on a server that has it; on one
// without it (Redis before 7.2) every call that writes fails with nothing
// sent, an error that names WAITAOF and is not an unknown outcome, and no
// call falls back to WAIT.
func TestWaitAOF(t *testing.T) {
	r := startReplicated(t, "--appendonly", "yes")
	ctx := context.Background()
	mc := waitClient(t, r.master.Addr())
	prefix := uniquePrefix(t)
	plain := newStore(t, mc, redisstock.Config{Prefix: prefix})
	if err := plain.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, HoldTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, mc, redisstock.Config{Prefix: prefix, WaitReplicas: 1, WaitAOF: true, WaitTimeout: time.Second})
	o := stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 2}}}
	has := mc.Do(ctx, "COMMAND", "INFO", "WAITAOF").Val()
	if l, ok := has.([]any); ok && len(l) == 1 && l[0] != nil {
		// Redis 7.2+ or Valkey 8: the replica fsyncs, the wait succeeds.
		if err := s.Deduct(ctx, o); err != nil {
			t.Fatalf("Deduct with WaitAOF: %v", err)
		}
		if commandCalls(t, mc, "waitaof") == 0 {
			t.Fatal("no WAITAOF ran")
		}
		return
	}
	evals, waits := commandCalls(t, mc, "evalsha"), commandCalls(t, mc, "wait")
	for range 2 { // the check is made again on every call
		err := s.Deduct(ctx, o)
		if err == nil || errors.Is(err, stock.ErrUnknownOutcome) || !strings.Contains(err.Error(), "WAITAOF") {
			t.Fatalf("Deduct with WaitAOF on Redis without WAITAOF: %v, want a certain error naming WAITAOF", err)
		}
	}
	if err := s.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 1}); err == nil || errors.Is(err, stock.ErrUnknownOutcome) {
		t.Fatalf("Restock with WaitAOF on Redis without WAITAOF: %v", err)
	}
	if e, w := commandCalls(t, mc, "evalsha"), commandCalls(t, mc, "wait"); e != evals || w != waits {
		t.Fatalf("EVALSHA %d -> %d, WAIT %d -> %d: something was sent", evals, e, waits, w)
	}
	if l := levels(t, plain, "a"); l.Available != 10 || l.Held != 0 {
		t.Fatalf("after the refused calls: %+v, want nothing taken", l)
	}
	if info, err := plain.Orders(ctx, []string{o.ID}); err != nil || info[0].State != stock.StateUnknown {
		t.Fatalf("Orders after the refused Deduct: %+v, %v", info, err)
	}
}

// TestWaitConfig: New checks the replication wait's settings.
func TestWaitConfig(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	defer c.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		c   redis.UniversalClient
		cfg redisstock.Config
	}{
		{c, redisstock.Config{WaitReplicas: -1}},
		{c, redisstock.Config{WaitReplicas: redisstock.MaxWaitReplicas + 1}},
		{c, redisstock.Config{WaitReplicas: 1, WaitTimeout: -time.Second}},
		{c, redisstock.Config{WaitReplicas: 1, WaitTimeout: 500 * time.Microsecond}},
		{c, redisstock.Config{WaitReplicas: 1, WaitTimeout: time.Second}}, // not below ReadTimeout
		{c, redisstock.Config{WaitAOF: true}},
		{ring, redisstock.Config{WaitReplicas: 1}},
	} {
		if _, err := redisstock.New(tc.c, tc.cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("New(%T, %+v): %v, want ErrInvalid", tc.c, tc.cfg, err)
		}
	}
	for _, tc := range []struct {
		c   redis.UniversalClient
		cfg redisstock.Config
	}{
		{c, redisstock.Config{WaitReplicas: 1}}, // the default timeout is halved below ReadTimeout
		{c, redisstock.Config{WaitReplicas: redisstock.MaxWaitReplicas, WaitTimeout: time.Millisecond, WaitAOF: true}},
		{cc, redisstock.Config{WaitReplicas: 2, WaitTimeout: 100 * time.Millisecond}},
		{ring, redisstock.Config{WaitTimeout: time.Hour}}, // ignored without WaitReplicas
	} {
		if _, err := redisstock.New(tc.c, tc.cfg); err != nil {
			t.Errorf("New(%T, %+v): %v", tc.c, tc.cfg, err)
		}
	}
}

// TestWaitOnlyWhenAsked: the default Config sends no WAIT; with
// WaitReplicas every call that writes does, and reads (Levels, Available,
// Orders, Snapshot) do not.
func TestWaitOnlyWhenAsked(t *testing.T) {
	r := startReplicated(t)
	ctx := context.Background()
	mc := waitClient(t, r.master.Addr())
	o := stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	flow := func(s *redisstock.Store) {
		t.Helper()
		if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10, PerUserLimit: 5, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.Restock(ctx, stock.Restock{OpID: "r1", SKU: "a", Units: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := s.Confirm(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Revert(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
	start := commandCalls(t, mc, "wait") // the harness's own
	flow(newStore(t, mc, redisstock.Config{}))
	if n := commandCalls(t, mc, "wait") - start; n != 0 {
		t.Fatalf("the default Config sent %d WAITs", n)
	}

	s := newStore(t, mc, redisstock.Config{WaitReplicas: 1})
	flow(s)
	if n := commandCalls(t, mc, "wait") - start; n < 5 {
		t.Fatalf("WaitReplicas 1: %d WAITs for 5 writing calls", n)
	}
	before := commandCalls(t, mc, "wait")
	if _, err := s.Available(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	levels(t, s, "a")
	if _, err := s.Orders(ctx, []string{o.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserUnits(ctx, "a", "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, []redisstock.SnapshotRequest{{SKU: "a", Orders: []string{o.ID}}}); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, mc, "wait"); n != before {
		t.Fatalf("reads sent %d WAITs", n-before)
	}
}

// TestWaitCoversEveryWrite: every method the Store calls on its client
// either is overridden by the waiting client (wait.go) or only reads. A
// new call of a writing method on s.c fails here until wait.go covers it.
func TestWaitCoversEveryWrite(t *testing.T) {
	reads := []string{"Exists", "Get", "HGet", "HMGet", "HExists", "HGetAll", "HScan", "SMembers", "SIsMember", "SMIsMember",
		"ZRange", "ZRangeWithScores", "ZRangeByScoreWithScores", "ZScore", "Info", "Options", "ScriptLoad"}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	used := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil && len(n.Recv.List) == 1 {
					if star, ok := n.Recv.List[0].Type.(*ast.StarExpr); ok {
						if id, ok := star.X.(*ast.Ident); ok && id.Name == "waitClient" {
							covered[n.Name.Name] = true
						}
					}
				}
			case *ast.SelectorExpr:
				if inner, ok := n.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "c" {
					if id, ok := inner.X.(*ast.Ident); ok && id.Name == "s" {
						used[n.Sel.Name] = fset.Position(n.Pos()).String()
					}
				}
			}
			return true
		})
	}
	if len(covered) == 0 || len(used) == 0 {
		t.Fatalf("found %d overrides and %d client calls: the check reads the wrong files", len(covered), len(used))
	}
	for m, at := range used {
		if !covered[m] && !slices.Contains(reads, m) {
			t.Errorf("%s: s.c.%s is neither waited for (wait.go) nor a read", at, m)
		}
	}
}

// TestWaitClusterWaitsOnTheKeysMaster: on a Redis Cluster the wait runs on
// the master that holds the command's keys (the shared test cluster has
// no replicas, so it falls short there and the call answers
// stock.ErrUnknownOutcome): a Deduct's first write, its bind, on the master
// of its directory shard, and a Restock on the SKU's.
func TestWaitClusterWaitsOnTheKeysMaster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(testdb.Need(t, testdb.Cluster), ",")})
	defer cc.Close()
	ctx := context.Background()
	prefix := uniquePrefix(t)
	plain := newStore(t, cc, redisstock.Config{Prefix: prefix})
	s := newStore(t, cc, redisstock.Config{Prefix: prefix, WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	for _, sku := range []string{"a", "b"} {
		if err := plain.PutOnSale(ctx, stock.Listing{SKU: sku, Units: 10, HoldTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	waited := func(key, what string, call func() error) {
		t.Helper()
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		before := commandCalls(t, node, "wait")
		if err := call(); !errors.Is(err, stock.ErrUnknownOutcome) {
			t.Fatalf("%s on a Cluster without replicas: %v, want ErrUnknownOutcome", what, err)
		}
		if commandCalls(t, node, "wait") == before {
			t.Fatalf("%s: no WAIT ran on %s, the master of %s", what, node.Options().Addr, key)
		}
	}
	for _, sku := range []string{"a", "b"} {
		o := stock.Order{ID: "o-" + sku, Items: []stock.Item{{SKU: sku, Qty: 1}}}
		waited(s.DirKey(o.ID), "Deduct "+o.ID, func() error { return s.Deduct(ctx, o) })
		r := stock.Restock{OpID: "r-" + sku, SKU: sku, Units: 1}
		waited(prefix+":{"+sku+"}:state", "Restock of "+sku, func() error { return s.Restock(ctx, r) })
		// Without the wait the retries complete the order and the
		// restock, each applied once.
		if err := plain.Deduct(ctx, o); err != nil {
			t.Fatal(err)
		}
		if err := plain.Restock(ctx, r); err != nil {
			t.Fatal(err)
		}
		if l := levels(t, plain, sku); l.Held != 1 || l.Available != 10 {
			t.Fatalf("SKU %s after the retries: %+v", sku, l)
		}
	}
}
