package handofftest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/stockguard/stockguard/handoff"
)

// The faults a FaultSale's cells inject through the interfaces, the same
// for every broker.

// KillAtAck returns src as a consumer that dies at its first Ack, as one
// killed with -9 between its Settles and their acks: no Ack leaves, and
// once one was swallowed, Fetch returns nothing until its ctx ends. kill
// is called with the order ID of each message whose Ack was swallowed
// (the place to drop the consumer's connection, as the broker sees a
// killed process do).
func KillAtAck(src handoff.Source, kill func(id string)) handoff.Source {
	return &killAtAck{Source: src, kill: kill, dead: make(chan struct{})}
}

type killAtAck struct {
	handoff.Source
	kill func(id string)
	once sync.Once
	dead chan struct{}
}

func (s *killAtAck) Fetch(ctx context.Context, max int) ([]handoff.Delivery, error) {
	select {
	case <-s.dead:
		<-ctx.Done()
		return nil, nil
	default:
	}
	ds, err := s.Source.Fetch(ctx, max)
	for i, d := range ds {
		ds[i] = killedDelivery{Delivery: d, s: s}
	}
	return ds, err
}

type killedDelivery struct {
	handoff.Delivery
	s *killAtAck
}

var errKilled = errors.New("handofftest: the consumer was killed before its ack")

func (d killedDelivery) Ack(context.Context) error {
	d.s.kill(d.Message().Order.ID)
	d.s.once.Do(func() { close(d.s.dead) })
	return errKilled
}

// PublishTwice returns p publishing every message twice, as a Recorder
// whose first publish's reply was lost and which published again.
func PublishTwice(p handoff.Publisher) handoff.Publisher { return twice{p} }

type twice struct{ handoff.Publisher }

func (p twice) Publish(ctx context.Context, m handoff.Message) error {
	if err := p.Publisher.Publish(ctx, m); err != nil {
		return err
	}
	return p.Publisher.Publish(ctx, m)
}

// CountFailures returns p adding each failed publish to failed: a cell
// that cuts the broker off proves with it that the cut was felt.
func CountFailures(p handoff.Publisher, failed *atomic.Int64) handoff.Publisher {
	return counting{p, failed}
}

type counting struct {
	handoff.Publisher
	failed *atomic.Int64
}

func (p counting) Publish(ctx context.Context, m handoff.Message) error {
	err := p.Publisher.Publish(ctx, m)
	if err != nil {
		p.failed.Add(1)
	}
	return err
}
