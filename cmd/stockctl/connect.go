package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/tiered"
)

// session is one command's connection to the shop: the gate, the record
// and the order flow over them, as a shop node builds them, and where the
// command prints.
type session struct {
	out, log io.Writer // stdout: tables and JSON; stderr: messages
	opts     options
	clock    stock.Clock
	gate     *redisstock.Store
	record   *sqlstock.Store
	flow     *tiered.Manager
	closers  []func()
}

// close releases the connections.
func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// reconciler returns a Reconciler over the session's tiers that rebuilds
// the gate with the hold times the shop's flow gives it.
func (s *session) reconciler(cfg reconcile.Config) (*reconcile.Reconciler, error) {
	cfg.GateHold = s.flow.GateHold
	cfg.RestockWindow = restockWindow(s.opts)
	cfg.Clock = s.clock
	return reconcile.New(s.gate, s.record, cfg)
}

// connect checks every setting that can be checked without I/O (usage
// errors), then reaches what the command needs (r): Redis and the
// database, whose tables must be there (a table that is missing is a usage
// error too: a wrong name, or a database 'stockctl init' has not made),
// or the database alone, or nothing.
func (p program) connect(ctx context.Context, o options, r reach, stdout, stderr io.Writer) (_ *session, err error) {
	s := &session{out: stdout, log: stderr, opts: o, clock: p.clock}
	if r == nothing {
		return s, nil
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()

	var rdb redis.UniversalClient
	var raddr string
	if r == gateAndRecord {
		if rdb, raddr, err = newRedis(o.redis, o.redisPassword); err != nil {
			return nil, err
		}
		s.closers = append(s.closers, func() { _ = rdb.Close() })
		gate, err := redisstock.New(rdb, redisstock.Config{Prefix: o.prefix, Retention: o.retention, Clock: p.clock})
		if err != nil {
			return nil, usagef("--prefix %q: %v", o.prefix, err)
		}
		s.gate = gate
	}

	t, err := databaseOf(o.driver, o.dsn, r == recordOnly)
	if err != nil {
		return nil, err
	}
	db, err := p.openRecord(s, t, o)
	if err != nil {
		return nil, err
	}

	if rdb != nil {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redis %s: %w", raddr, err)
		}
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	if r == recordOnly {
		return s, nil
	}
	if err := checkTables(ctx, db, s.record, t.name); err != nil {
		return nil, err
	}
	s.flow = tiered.New(s.gate, s.record, tiered.Config{RecordGrace: o.recordGrace, Clock: p.clock})
	return s, nil
}

// openRecord opens the database t names (without connecting) and sets
// s.record to the Store over it, with the shop's table and column names.
func (p program) openRecord(s *session, t target, o options) (*sql.DB, error) {
	cols, err := parseColumns(o.columns)
	if err != nil {
		return nil, usagef("%v", err)
	}
	db, err := t.open()
	if err != nil {
		return nil, usagef("--dsn: %v", err)
	}
	s.closers = append(s.closers, func() { _ = db.Close() })
	db.SetMaxOpenConns(4)
	cfg := sqlstock.Config{Dialect: t.dialect, Table: o.table, Ledger: o.ledger, Columns: cols, Clock: p.clock}
	if cfg.Dialect == sqlstock.MySQL {
		cfg.Dialect = 0 // the Store asks the server whether it is MariaDB or MySQL
	}
	if s.record, err = sqlstock.New(db, cfg); err != nil {
		return nil, usagef("--table, --ledger or --columns: %v", err)
	}
	return db, nil
}

// newRedis returns a client for addr (host:port, a redis:// URL, or a
// comma-separated list of Cluster nodes), without connecting, and the
// address to name in errors (never the password).
func newRedis(addr, password string) (redis.UniversalClient, string, error) {
	addr = strings.TrimSpace(addr)
	const (
		dial = 3 * time.Second
		rw   = 5 * time.Second
	)
	switch {
	case addr == "":
		return nil, "", usagef("no Redis address: give --redis or set STOCKCTL_REDIS")
	case strings.HasPrefix(addr, "redis://") || strings.HasPrefix(addr, "rediss://"):
		opt, err := redis.ParseURL(addr)
		if err != nil {
			return nil, "", usagef("--redis: %v", err)
		}
		if opt.Password == "" {
			opt.Password = password
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.DialerRetries, opt.ContextTimeoutEnabled = dial, rw, rw, 2, true
		return redis.NewClient(opt), opt.Addr, nil
	case strings.Contains(addr, ","):
		var nodes []string
		for _, n := range strings.Split(addr, ",") {
			if n = strings.TrimSpace(n); n == "" {
				continue
			}
			if _, _, err := net.SplitHostPort(n); err != nil {
				return nil, "", usagef("--redis: Cluster node %q: want host:port", n)
			}
			nodes = append(nodes, n)
		}
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, Password: password,
			DialTimeout: dial, ReadTimeout: rw, WriteTimeout: rw, ContextTimeoutEnabled: true})
		return c, "cluster " + strings.Join(nodes, ","), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, "", usagef("--redis %q: want host:port, a redis:// URL or a comma-separated list of Cluster nodes", addr)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password,
		DialTimeout: dial, ReadTimeout: rw, WriteTimeout: rw, DialerRetries: 2, ContextTimeoutEnabled: true})
	return c, addr, nil
}
