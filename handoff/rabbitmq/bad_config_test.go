package rabbitmq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stockguard/stockguard/handoff/rabbitmq"
	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
)

// A Config that cannot be used is refused, as every invalid input of the
// project is, with an error matching stock.ErrInvalid, before anything
// connects; so is a Fetch of fewer than one message.
func TestBadConfigMatchesErrInvalid(t *testing.T) {
	const nowhere = "amqp://guest:guest@127.0.0.1:1/"
	for name, cfg := range map[string]rabbitmq.Config{
		"negative Redelivery":     {Redelivery: -time.Second},
		"negative PublishTimeout": {PublishTimeout: -time.Second},
		"Queue is DeadQueue":      {Queue: "sgtest.same", DeadQueue: "sgtest.same"},
	} {
		if _, err := rabbitmq.NewPublisher(ctxT(t), nowhere, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("NewPublisher with %s = %v; want an error matching stock.ErrInvalid", name, err)
		}
		if _, err := rabbitmq.NewSource(ctxT(t), nowhere, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("NewSource with %s = %v; want an error matching stock.ErrInvalid", name, err)
		}
	}
	url := testdb.Need(t, broker)
	src := source(t, url, config(t, url, time.Second))
	if _, err := src.Fetch(ctxT(t), 0); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("Fetch of 0 = %v; want an error matching stock.ErrInvalid", err)
	}
}
