// Command flashsale plays a whole flash sale through stockguard's public API,
// wired the way an application would wire it:
//
//	limiter → Redis gate (hold) → Redis Streams queue → database record
//	→ buyers pay, or never do → reclaimer returns unpaid units → resold
//	→ Redis and the database are checked against each other
//
// With no flags it needs no servers: Redis is an in-process miniredis and the
// database is SQLite in a temporary directory. -redis, -mysql and -postgres
// point it at real servers instead (keys and tables are unique to the run
// and removed afterwards). Orders pass a breaker (package degrade) whose
// fallback is the database record itself. -chaos stops Redis midway: the
// breaker sends orders straight to the database, at -fallback-rate, until
// Redis is back, has been reconciled with the database, and takes traffic
// again in steps.
//
// It prints a progress bar on stderr and a report on stdout (-json: one JSON
// object), and exits 1 if anything was oversold or Redis and the database
// disagree at the end, 2 on bad flags.
//
// -metrics ADDR serves /metrics on ADDR while the sale runs: every part
// reports to the OpenTelemetry adapter (module otelstock), read by
// OpenTelemetry's Prometheus exporter, with both tiers' levels of every
// SKU and the queue's depth. -plot FILE.png draws the sale over time: the
// database's available units per SKU, attempts per second by outcome, the
// queue's depth, the units reclaimed, and the breaker's state, with the
// spells Redis was down and the breaker was not primary shaded.
//
// This directory is a module of its own (it needs OpenTelemetry and
// gonum/plot, which stockguard's core does not); the repository's go.work
// lets `go run ./examples/flashsale` work from the repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the sale's size and where it runs.
type config struct {
	units, userRate, perUser     int64
	skus, attempts, users        int
	workers, consumers, queueMax int
	fallbackRate                 int
	maxGroup                     int
	unpaid                       float64
	duration, hold, maxLag       time.Duration
	maxDeliveries                int64
	batch                        int
	queue                        string

	redisAddr, mysqlDSN, postgresDSN string
	natsURL, amqpURL                 string
	chaos, json, quiet               bool
	metricsAddr, plotFile            string
}

// Exit codes.
const (
	exitOK       = 0
	exitFailed   = 1 // oversold, drift, or the sale could not run
	exitBadUsage = 2
)

// run is the whole program; main only supplies its arguments and streams.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitBadUsage
	}
	rep, err := sell(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "flashsale:", err)
		return exitFailed
	}
	if cfg.json {
		err = rep.writeJSON(stdout)
	} else {
		err = rep.writeTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "flashsale:", err)
		return exitFailed
	}
	if !rep.ok() {
		fmt.Fprintln(stderr, "flashsale: the sale broke a promise: oversold", rep.Oversold, "undersold", rep.Undersold, "of at most", rep.UndersoldBound,
			"lost sales", rep.Lost, "leaked", rep.Leaked, "drift", rep.Drift, "accounting exact", rep.Accounting)
		return exitFailed
	}
	return exitOK
}

// parseFlags reads args into a config. Errors have been printed to stderr
// with the usage.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("flashsale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&c.units, "units", 1000, "units on sale, split over the SKUs")
	fs.IntVar(&c.skus, "skus", 4, "number of SKUs")
	fs.IntVar(&c.attempts, "attempts", 20000, "purchase attempts")
	fs.IntVar(&c.users, "users", 5000, "distinct buyers")
	fs.Float64Var(&c.unpaid, "unpaid", 0.2, "fraction of orders never paid for")
	fs.Int64Var(&c.perUser, "limit", 2, "per-user limit, units of one SKU")
	fs.Int64Var(&c.userRate, "user-rate", 2, "attempts per second one user may make")
	fs.DurationVar(&c.duration, "duration", 12*time.Second, "how long the attempts keep arriving")
	fs.DurationVar(&c.hold, "hold", 3*time.Second, "how long an order may stay unpaid")
	fs.IntVar(&c.workers, "workers", 64, "concurrent buyers")
	fs.IntVar(&c.consumers, "consumers", 16, "queue consumers writing the database record")
	fs.IntVar(&c.queueMax, "queue-max", 2000, "hand-offs in flight before new orders are turned away as busy")
	fs.DurationVar(&c.maxLag, "max-lag", 0, "queue lag past which new orders are turned away as busy (0: a quarter of -hold)")
	fs.StringVar(&c.queue, "queue", "redis", "the hand-off's broker: "+strings.Join(queueKinds, ", "))
	fs.IntVar(&c.batch, "batch", 8, "hand-offs one consumer fetches and settles at once (at most the record's group)")
	fs.Int64Var(&c.maxDeliveries, "max-deliveries", 5, "deliveries of one hand-off before it is dead-lettered, once its hold has ended (before, it is retried until the record takes it)")
	fs.IntVar(&c.fallbackRate, "fallback-rate", 200, "orders per second the database takes directly while the breaker is open")
	fs.IntVar(&c.maxGroup, "max-group", 0, "most orders the database record writes in one transaction (sqlstock Config.MaxGroup; 0: its default, 1: no grouping)")
	fs.StringVar(&c.natsURL, "nats", "", "NATS (JetStream) URL for -queue nats, e.g. nats://127.0.0.1:4222 (default: an in-process server)")
	fs.StringVar(&c.amqpURL, "amqp", "amqp://guest:guest@127.0.0.1:5672/", "RabbitMQ URL for -queue rabbitmq")
	fs.StringVar(&c.redisAddr, "redis", "", "Redis address (default: in-process miniredis)")
	fs.StringVar(&c.mysqlDSN, "mysql", "", "MySQL/MariaDB DSN, e.g. 'root@tcp(127.0.0.1:3306)/test' (default: SQLite in a temp dir)")
	fs.StringVar(&c.postgresDSN, "postgres", "", "PostgreSQL URL, e.g. 'postgres://postgres@127.0.0.1:5432/test'")
	fs.BoolVar(&c.chaos, "chaos", false, "stop Redis midway (with -redis: cut a proxy in front of it) and bring it back")
	fs.BoolVar(&c.json, "json", false, "print the report as one JSON object")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	fs.StringVar(&c.metricsAddr, "metrics", "", "serve Prometheus metrics (OpenTelemetry, package otelstock) on this address while the sale runs, e.g. 127.0.0.1:9464")
	fs.StringVar(&c.plotFile, "plot", "", "draw the sale over time into this PNG file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flashsale [flags]\n\nPlays a flash sale through stockguard and checks that nothing was oversold.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.maxLag == 0 {
		c.maxLag = c.hold / 4
	}
	if err := c.validate(fs.Args()); err != nil {
		fmt.Fprintln(stderr, "flashsale:", err)
		fmt.Fprintln(stderr, "run 'flashsale -h' for the flags")
		return c, err
	}
	return c, nil
}

// validate refuses sizes the sale cannot run with.
func (c config) validate(rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q (flags start with -)", rest[0])
	case c.skus < 1 || c.skus > 1000:
		return fmt.Errorf("-skus %d: want 1 to 1000", c.skus)
	case c.units < int64(c.skus) || c.units > 1e9:
		return fmt.Errorf("-units %d: want at least one per SKU (-skus %d) and at most 1e9", c.units, c.skus)
	case c.attempts < 1 || c.attempts > 10_000_000:
		return fmt.Errorf("-attempts %d: want 1 to 10,000,000", c.attempts)
	case c.users < 1:
		return fmt.Errorf("-users %d: want at least 1", c.users)
	case c.unpaid < 0 || c.unpaid > 1:
		return fmt.Errorf("-unpaid %g: want a fraction from 0 to 1", c.unpaid)
	case c.perUser < 0:
		return fmt.Errorf("-limit %d: want 0 (none) or more", c.perUser)
	case c.userRate < 1:
		return fmt.Errorf("-user-rate %d: want at least 1", c.userRate)
	case c.duration < 0 || c.duration > time.Hour:
		return fmt.Errorf("-duration %s: want 0 to 1h", c.duration)
	case c.hold < 100*time.Millisecond || c.hold > time.Hour:
		return fmt.Errorf("-hold %s: want 100ms to 1h", c.hold)
	case c.workers < 1 || c.workers > 4096:
		return fmt.Errorf("-workers %d: want 1 to 4096", c.workers)
	case c.consumers < 1 || c.consumers > 256:
		return fmt.Errorf("-consumers %d: want 1 to 256", c.consumers)
	case c.queueMax < 1:
		return fmt.Errorf("-queue-max %d: want at least 1", c.queueMax)
	case c.maxLag < 0 || c.maxLag >= c.hold:
		return fmt.Errorf("-max-lag %s: want 0 (a quarter of -hold) or less than -hold %s", c.maxLag, c.hold)
	case !slices.Contains(queueKinds, c.queue):
		return fmt.Errorf("-queue %q: want one of %s", c.queue, strings.Join(queueKinds, ", "))
	case c.batch < 1 || c.batch > 1024:
		return fmt.Errorf("-batch %d: want 1 to 1024", c.batch)
	case c.maxDeliveries < 1:
		return fmt.Errorf("-max-deliveries %d: want at least 1", c.maxDeliveries)
	case c.maxGroup < 0 || c.maxGroup > 1024:
		return fmt.Errorf("-max-group %d: want 0 (the default) to 1024", c.maxGroup)
	case c.maxGroup > 0 && c.batch > c.maxGroup:
		return fmt.Errorf("-batch %d: want at most -max-group %d (a batch is written in one transaction)", c.batch, c.maxGroup)
	case c.fallbackRate < 1:
		return fmt.Errorf("-fallback-rate %d: want at least 1", c.fallbackRate)
	case c.mysqlDSN != "" && c.postgresDSN != "":
		return errors.New("-mysql and -postgres: pick one database")
	case c.plotFile != "" && !strings.HasSuffix(strings.ToLower(c.plotFile), ".png"):
		return fmt.Errorf("-plot %s: want a file name ending in .png", c.plotFile)
	}
	return nil
}
