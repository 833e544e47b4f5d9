package otelstock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/XSAM/otelsql"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/otelstock"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// With redisotel on the Redis client and otelsql on the database, their
// spans nest under stockguard's: a Shop's Deduct is degrade.deduct, over
// tiered.deduct, over the gate's redisstock.deduct (whose script call is
// redisotel's evalsha span) and the record's sqlstock.deduct (whose
// statements are otelsql's sql.* spans). Give the three the same
// TracerProvider.
func Example_redisotelAndOtelsql() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	dir, err := os.MkdirTemp("", "nest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		panic(err)
	}
	sqldb, err := otelsql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)",
		otelsql.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	defer sqldb.Close()
	a, err := otelstock.New(otelstock.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	shop, err := stockguard.New(rdb, sqldb, stockguard.Config{Observer: a.Observer(),
		Record: sqlstock.Config{Dialect: sqlstock.SQLite}}) // otelsql hides the driver: name the dialect
	if err != nil {
		panic(err)
	}
	defer shop.Close()
	ctx := context.Background()
	if err := shop.CreateTables(ctx); err != nil {
		panic(err)
	}
	if err := shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 5}); err != nil {
		panic(err)
	}
	// The first order a fresh server sees loads the Deduct script there
	// (an eval span); the next one's call is a plain evalsha.
	if err := shop.Deduct(ctx, stock.Order{ID: "o0", Items: []stock.Item{{SKU: "phone", Qty: 1}}}); err != nil {
		panic(err)
	}
	rec = tracetest.NewSpanRecorder()
	tp.RegisterSpanProcessor(rec)
	if err := shop.Deduct(ctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "phone", Qty: 1}}}); err != nil {
		panic(err)
	}

	// Print each kind of parent -> child edge once (but database/sql's
	// reset of a pooled connection, which comes and goes).
	names := map[string]string{}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	var edges []string
	for _, s := range rec.Ended() {
		e := names[s.Parent().SpanID().String()] + " -> " + s.Name()
		if p := names[s.Parent().SpanID().String()]; p != "" && s.Name() != "sql.conn.reset_session" && !slices.Contains(edges, e) {
			edges = append(edges, e)
		}
	}
	slices.Sort(edges)
	for _, e := range edges {
		fmt.Println(e)
	}
	// Output:
	// degrade.deduct -> tiered.deduct
	// redisstock.deduct -> evalsha
	// redisstock.deduct -> redisstock.batch
	// sqlstock.deduct -> sql.conn.exec
	// sqlstock.deduct -> sqlstock.batch
	// tiered.deduct -> redisstock.deduct
	// tiered.deduct -> sqlstock.deduct
}
