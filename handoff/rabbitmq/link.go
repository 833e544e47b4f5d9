package rabbitmq

import (
	"context"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// link is a connection and one channel on it, opened on first use and
// again after either closed (a broker restart, a channel error). The
// queues are declared on every new channel.
type link struct {
	url     string
	cfg     Config
	confirm bool // the channel is in confirm mode

	mu     sync.Mutex
	conn   *amqp.Connection
	ch     *amqp.Channel
	closed bool
}

// channel returns the link's open channel, opening a connection and a
// channel when the last ones closed.
func (l *link) channel(ctx context.Context) (*amqp.Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	if l.ch != nil && !l.ch.IsClosed() {
		return l.ch, nil
	}
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := amqp.DialConfig(l.url, l.cfg.Connection)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq: connect: %w", err)
		}
		l.conn = conn
	}
	ch, err := l.conn.Channel()
	if err != nil {
		_ = l.conn.Close()
		return nil, fmt.Errorf("rabbitmq: open a channel: %w", err)
	}
	if l.confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return nil, fmt.Errorf("rabbitmq: confirm mode: %w", err)
		}
	}
	if err := l.cfg.declare(ch); err != nil {
		_ = ch.Close()
		return nil, err
	}
	l.ch = ch
	return ch, nil
}

// broken closes ch if it is still the link's channel, so that the next
// call opens another: after an error whose channel or connection may be
// unusable.
func (l *link) broken(ch *amqp.Channel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == ch && l.ch != nil {
		_ = l.ch.Close()
		l.ch = nil
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
	l.ch = nil
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
