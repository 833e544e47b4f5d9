package rabbitmq

import (
	"context"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// link is a connection and one channel on it, opened on first use and
// again after either closed (a broker restart, a channel error, a message
// returned because its queue is gone). The queues are declared on every
// new channel.
type link struct {
	url     string
	cfg     Config
	confirm bool // the channel is in confirm mode

	mu     sync.Mutex
	conn   *amqp.Connection
	ch     *amqp.Channel
	ret    *returns // ch's returned messages, in confirm mode
	closed bool
}

// channel returns the link's open channel, opening a connection and a
// channel when the last ones closed.
func (l *link) channel(ctx context.Context) (*amqp.Channel, error) {
	ch, _, err := l.publishing(ctx)
	return ch, err
}

// publishing is channel with the returns of the channel, nil unless the
// link is in confirm mode (a publishing link publishes mandatory).
func (l *link) publishing(ctx context.Context) (*amqp.Channel, *returns, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil, errClosed
	}
	if l.ch != nil && !l.ch.IsClosed() {
		return l.ch, l.ret, nil
	}
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := amqp.DialConfig(l.url, l.cfg.Connection)
		if err != nil {
			return nil, nil, fmt.Errorf("rabbitmq: connect: %w", err)
		}
		l.conn = conn
	}
	ch, err := l.conn.Channel()
	if err != nil {
		_ = l.conn.Close()
		return nil, nil, fmt.Errorf("rabbitmq: open a channel: %w", err)
	}
	var ret *returns
	if l.confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return nil, nil, fmt.Errorf("rabbitmq: confirm mode: %w", err)
		}
		ret = newReturns(ch)
	}
	if err := l.cfg.declare(ch); err != nil {
		_ = ch.Close()
		return nil, nil, err
	}
	l.ch, l.ret = ch, ret
	return ch, ret, nil
}

// broken closes ch if it is still the link's channel, so that the next
// call opens another: after an error whose channel or connection may be
// unusable.
func (l *link) broken(ch *amqp.Channel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == ch && l.ch != nil {
		_ = l.ch.Close()
		l.ch, l.ret = nil, nil
		if l.conn != nil && l.conn.IsClosed() {
			l.conn = nil
		}
	}
}

// close closes the link's connection for good: the broker hands back every
// message delivered on it and not acknowledged.
func (l *link) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.ch, l.ret = nil, nil
	if l.conn == nil {
		return nil
	}
	err := l.conn.Close()
	l.conn = nil
	if err != nil && err != amqp.ErrClosed {
		return err
	}
	return nil
}
