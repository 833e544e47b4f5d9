package rabbitmq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stockguard/stockguard/handoff"
	"github.com/stockguard/stockguard/handoff/handofftest"
	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// broker is the RabbitMQ the tests run on: STOCKGUARD_AMQP_URL, such as
// amqp://guest:guest@127.0.0.1:5672/. Without it they skip.
var broker = testdb.Server{Env: "STOCKGUARD_AMQP_URL", What: "RabbitMQ", Form: "amqp://user:password@host:port/"}

var names atomic.Int64

// config returns a Config with queue names of the test's own (parallel
// runs of the package, and tests, do not share them) and the given
// Redelivery; its queues are deleted with the test.
func config(t testing.TB, url string, redelivery time.Duration) rabbitmq.Config {
	t.Helper()
	id := fmt.Sprintf("%d.%d.%d", os.Getpid(), time.Now().UnixNano()%1e9, names.Add(1))
	cfg := rabbitmq.Config{
		Queue:      "sgtest.handoff." + id,
		DeadQueue:  "sgtest.dead." + id,
		Redelivery: redelivery,
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(url)
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(cfg.Queue, false, false, false)
		_, _ = ch.QueueDelete(cfg.DeadQueue, false, false, false)
	})
	return cfg
}

// publisher and source open a Publisher and a Source, closed with the test.
func publisher(t testing.TB, url string, cfg rabbitmq.Config) *rabbitmq.Publisher {
	t.Helper()
	p, err := rabbitmq.NewPublisher(ctxT(t), url, cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func source(t testing.TB, url string, cfg rabbitmq.Config) *rabbitmq.Source {
	t.Helper()
	s, err := rabbitmq.NewSource(ctxT(t), url, cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// harness is the conformance suite's Harness on the broker at url.
func harness(url string, redelivery time.Duration) handofftest.Harness {
	return handofftest.Harness{
		Redelivery: redelivery,
		New: func(t *testing.T) handofftest.Queue {
			cfg := config(t, url, redelivery)
			return handofftest.Queue{
				Publisher: publisher(t, url, cfg),
				NewSource: func() handoff.Source { return source(t, url, cfg) },
				DeadLetters: func(ctx context.Context) ([]handofftest.DeadLetter, error) {
					return deadLetters(url, cfg.DeadQueue)
				},
			}
		},
	}
}

// deadLetters reads the dead-letter queue (and puts back what it read).
func deadLetters(url, queue string) ([]handofftest.DeadLetter, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, err
	}
	defer conn.Close() // hands back what was read
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	var out []handofftest.DeadLetter
	for {
		msg, ok, err := ch.Get(queue, false)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		var m handoff.Message
		if err := json.Unmarshal(msg.Body, &m); err != nil {
			return nil, err
		}
		reason, _ := msg.Headers[rabbitmq.ReasonHeader].(string)
		out = append(out, handofftest.DeadLetter{Message: m, Reason: reason})
	}
}

// ctxT is a context for a setup step, ended with the test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConformance runs the handoff adapter contract on the broker.
func TestConformance(t *testing.T) {
	url := testdb.Need(t, broker)
	t.Parallel()
	handofftest.Run(t, harness(url, 500*time.Millisecond))
}
