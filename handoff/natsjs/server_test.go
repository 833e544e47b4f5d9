package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/natsjs"
)

// natsEnv names the NATS server (with JetStream) the tests run on; without
// it they run on a server embedded in the test binary.
const natsEnv = "STOCKGUARD_NATS_URL"

var embedded struct {
	once sync.Once
	srv  *server.Server
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if embedded.srv != nil {
		embedded.srv.Shutdown()
		embedded.srv.WaitForShutdown()
		_ = os.RemoveAll(embedded.dir)
	}
	os.Exit(code)
}

// serverURL is the URL of the tests' NATS server: the one natsEnv names, or
// one started in-process (once) with JetStream on a temporary directory.
func serverURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv(natsEnv); u != "" {
		return u
	}
	embedded.once.Do(func() {
		embedded.dir, embedded.err = os.MkdirTemp("", "natsjs-test-")
		if embedded.err != nil {
			return
		}
		embedded.srv, embedded.err = startServer(embedded.dir, -1)
	})
	if embedded.err != nil {
		t.Fatalf("embedded NATS server: %v", embedded.err)
	}
	return embedded.srv.ClientURL()
}

// startServer starts a NATS server with JetStream in-process on loopback,
// storing in dir, on port (-1: a free one).
func startServer(dir string, port int) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("not ready after 30s")
	}
	return srv, nil
}

// connect returns a JetStream client on url that reconnects for ever;
// closed with the test.
func connect(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	return js
}

var names atomic.Int64

// config returns a Config with stream, subject and consumer names of the
// test's own (parallel runs of the package, and tests, do not share
// them), and the given AckWait; its streams are deleted with the test.
func config(t testing.TB, js jetstream.JetStream, ackWait time.Duration) natsjs.Config {
	t.Helper()
	id := fmt.Sprintf("%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, names.Add(1))
	cfg := natsjs.Config{
		Stream:   "SGTEST_" + id,
		Subject:  "sgtest." + id,
		Consumer: "record_" + id,
		AckWait:  ackWait,
		PollWait: 200 * time.Millisecond,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, cfg.Stream)
		_ = js.DeleteStream(ctx, cfg.Stream+"_DEAD")
	})
	return cfg
}

// harness is the conformance suite's Harness on the tests' server.
func harness(redelivery time.Duration) handofftest.Harness {
	return handofftest.Harness{
		Redelivery:   redelivery,
		Deduplicates: true,
		New: func(t *testing.T) handofftest.Queue {
			js := connect(t, serverURL(t))
			cfg := config(t, js, redelivery)
			pub, err := natsjs.NewPublisher(ctxT(t), js, cfg)
			if err != nil {
				t.Fatalf("NewPublisher: %v", err)
			}
			return handofftest.Queue{
				Publisher: pub,
				NewSource: func() handoff.Source {
					src, err := natsjs.NewSource(ctxT(t), connect(t, serverURL(t)), cfg)
					if err != nil {
						t.Fatalf("NewSource: %v", err)
					}
					return src
				},
				DeadLetters: func(ctx context.Context) ([]handofftest.DeadLetter, error) {
					return deadLetters(ctx, js, cfg.Stream+"_DEAD")
				},
			}
		},
	}
}

// deadLetters reads every message of the dead-letter stream, in order.
func deadLetters(ctx context.Context, js jetstream.JetStream, stream string) ([]handofftest.DeadLetter, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []handofftest.DeadLetter
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		var m handoff.Message
		if err := jsonUnmarshal(raw.Data, &m); err != nil {
			return nil, err
		}
		out = append(out, handofftest.DeadLetter{Message: m, Reason: raw.Header.Get(natsjs.ReasonHeader)})
	}
	return out, nil
}

// ctxT is a context for a setup step, ended with the test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
