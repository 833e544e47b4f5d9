package rabbitmq

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// dialTimeout bounds the TCP dial and, separately, the TLS and AMQP
// handshake of a connection whose Config.Connection.Dial is nil.
const dialTimeout = 10 * time.Second

// link is a connection and one channel on it, opened on first use and
// again after either closed (a broker restart, a channel error, a message
// returned because its queue is gone). The queues are declared on every
// new channel.
//
// One attempt at a time opens them, outside the link's mutex: the callers
// that need the channel meanwhile wait for that attempt, each until its
// own context ends. The attempt runs until it succeeds or fails (the dial
// and handshake bounded by Config.Connection's timeout) or the link is
// closed, so a caller whose context ends leaves it to the next.
type link struct {
	url     string
	cfg     Config
	confirm bool // the channel is in confirm mode

	mu      sync.Mutex
	conn    *amqp.Connection
	ch      *amqp.Channel
	ret     *returns // ch's returned messages, in confirm mode
	opening *opening // the attempt under way, nil when none
	stop    context.CancelFunc
	life    context.Context // ends with close: bounds every attempt
	closed  bool
}

// opening is one attempt to open the link's channel; done is closed once
// ch, ret and err are set.
type opening struct {
	done chan struct{}
	ch   *amqp.Channel
	ret  *returns
	err  error
}

// newLink returns a link to the broker at url, not connected yet.
func newLink(url string, cfg Config, confirm bool) *link {
	life, stop := context.WithCancel(context.Background())
	return &link{url: url, cfg: cfg, confirm: confirm, life: life, stop: stop}
}

// channel returns the link's open channel, opening a connection and a
// channel when the last ones closed.
func (l *link) channel(ctx context.Context) (*amqp.Channel, error) {
	ch, _, err := l.publishing(ctx)
	return ch, err
}

// publishing is channel with the returns of the channel, nil unless the
// link is in confirm mode (a publishing link publishes mandatory). It
// returns once ctx ends or the link is closed, whether or not the channel
// is open by then.
func (l *link) publishing(ctx context.Context) (*amqp.Channel, *returns, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, errClosed
	}
	if l.ch != nil && !l.ch.IsClosed() {
		ch, ret := l.ch, l.ret
		l.mu.Unlock()
		return ch, ret, nil
	}
	o := l.opening
	if o == nil {
		o = &opening{done: make(chan struct{})}
		l.opening = o
		go l.open(o)
	}
	l.mu.Unlock()
	select {
	case <-o.done:
		return o.ch, o.ret, o.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("rabbitmq: connect: %w", ctx.Err())
	case <-l.life.Done(): // closed: the attempt may be stuck in a Dial
		return nil, nil, errClosed
	}
}

// open is the attempt o: it connects if the link's connection closed,
// opens a channel on it and declares the queues, then publishes the
// channel (or the error) to the link and to o's waiters.
func (l *link) open(o *opening) {
	ch, ret, err := l.openChannel()
	l.mu.Lock()
	l.opening = nil
	if err == nil && l.closed {
		go func() { _ = ch.Close() }()
		ch, ret, err = nil, nil, errClosed
	}
	if err == nil {
		l.ch, l.ret = ch, ret
	}
	o.ch, o.ret, o.err = ch, ret, err
	l.mu.Unlock()
	close(o.done)
}

// openChannel opens a channel on the link's connection, connecting first
// if it closed, and declares the queues on it.
func (l *link) openChannel() (*amqp.Channel, *returns, error) {
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		c, err := l.dial(l.life)
		if err != nil {
			return nil, nil, fmt.Errorf("rabbitmq: connect: %w", err)
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			return nil, nil, errClosed
		}
		l.conn, conn = c, c
		l.mu.Unlock()
	}
	ch, err := conn.Channel()
	if err != nil {
		l.mu.Lock()
		if l.conn == conn {
			l.conn = nil
		}
		l.mu.Unlock()
		_ = conn.Close()
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
	return ch, ret, nil
}

// dial connects to the broker with Config.Connection, until ctx ends:
// the TCP dial is bound by ctx (net.Dialer.DialContext, or
// Config.Connection.Dial as given), and the TLS and AMQP handshake by the
// socket's deadline and by ctx, whose end closes the socket.
func (l *link) dial(ctx context.Context) (*amqp.Connection, error) {
	cfg := l.cfg.Connection
	given := cfg.Dial
	var sock net.Conn
	var release func() bool
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		if given != nil {
			c, err = given(network, addr)
		} else {
			d := net.Dialer{Timeout: dialTimeout}
			if c, err = d.DialContext(ctx, network, addr); err == nil {
				// The handshake's deadline; amqp091 clears it once the
				// connection is open.
				err = c.SetDeadline(time.Now().Add(dialTimeout))
			}
		}
		if err != nil {
			if c != nil {
				_ = c.Close()
			}
			return nil, err
		}
		sock = c
		release = context.AfterFunc(ctx, func() { _ = c.Close() })
		return c, nil
	}
	conn, err := amqp.DialConfig(l.url, cfg)
	if release != nil && !release() {
		// ctx ended during the handshake and closed the socket.
		if err == nil {
			_ = conn.Close()
		}
		_ = sock.Close()
		return nil, ctx.Err()
	}
	return conn, err
}

// broken detaches ch from the link if it is still its channel, so that the
// next call opens another, and closes it (in the background: on a stalled
// connection the close waits for the broker's reply), which makes the
// broker hand back what it delivered on ch. After an error whose channel
// or connection may be unusable.
func (l *link) broken(ch *amqp.Channel) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == ch && l.ch != nil {
		l.ch, l.ret = nil, nil
		if l.conn != nil && l.conn.IsClosed() {
			l.conn = nil
		}
		go func() { _ = ch.Close() }()
	}
}

// closeWait bounds close's wait for the broker's answer (on a stalled
// connection); the socket is closed either way.
const closeWait = 2 * time.Second

// close closes the link's connection for good: the broker hands back every
// message delivered on it and not acknowledged. An attempt to open it
// under way ends.
func (l *link) close() error {
	l.mu.Lock()
	l.closed = true
	l.stop()
	l.ch, l.ret = nil, nil
	conn := l.conn
	l.conn = nil
	l.mu.Unlock()
	if conn == nil {
		return nil
	}
	if err := conn.CloseDeadline(time.Now().Add(closeWait)); err != nil && err != amqp.ErrClosed {
		return err
	}
	return nil
}
