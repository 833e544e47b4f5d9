package chaos

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a TCP proxy between the library and a server, for network
// faults a harness injects on purpose: it forwards bytes both ways, and on
// demand switches its upstream (a failover), cuts every connection, pauses
// forwarding (a frozen link: a replica that lags), or forwards a request
// and drops the reply to it (the server acted, the client never hears).
// It is safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream atomic.Pointer[string]
	drop     atomic.Pointer[func(request []byte) bool]
	dropped  atomic.Int64

	mu     sync.Mutex
	conns  map[*link]struct{}
	paused chan struct{} // closed while forwarding runs, open while paused
	closed bool
	wg     sync.WaitGroup
}

// link is one proxied connection: client side and server side.
type link struct {
	client, server net.Conn
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// NewProxy listens on a free loopback port and forwards every connection
// to upstream.
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, conns: make(map[*link]struct{}), paused: make(chan struct{})}
	close(p.paused)
	p.upstream.Store(&upstream)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the address new connections are forwarded to.
func (p *Proxy) Upstream() string { return *p.upstream.Load() }

// SetUpstream sends new connections to addr; open ones keep their server
// until cut.
func (p *Proxy) SetUpstream(addr string) { p.upstream.Store(&addr) }

// CutAll closes every open connection, both sides.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// Conns is the number of open connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Pause stops forwarding in both directions on every connection (bytes
// wait in the kernel's buffers) until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.paused:
		p.paused = make(chan struct{})
	default: // already paused
	}
}

// Resume undoes Pause.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.paused:
	default:
		close(p.paused)
	}
}

// DropReplies sets the rule for lost replies: each chunk a client sends is
// shown to match, and when it returns true the chunk is forwarded to the
// server, the server's reply is discarded and the connection is closed, as
// a network that fails right after the request went through. Nil forwards
// everything.
func (p *Proxy) DropReplies(match func(request []byte) bool) {
	if match == nil {
		p.drop.Store(nil)
		return
	}
	p.drop.Store(&match)
}

// Dropped is how many replies were dropped so far.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Resume()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.Upstream(), time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		var cut atomic.Bool // a reply is being dropped: the server's bytes go nowhere
		go p.pipe(l, c, s, func(b []byte) {
			if m := p.drop.Load(); m != nil && (*m)(b) {
				cut.Store(true)
			}
		}, nil)
		go p.pipe(l, s, c, nil, &cut)
	}
}

// pipe copies from src to dst until either side fails. inspect sees every
// chunk before it is forwarded; a set cut makes the chunk be discarded and
// the link closed shortly after (the reply is lost).
func (p *Proxy) pipe(l *link, src, dst net.Conn, inspect func([]byte), cut *atomic.Bool) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.paused
			p.mu.Unlock()
			<-gate
			if inspect != nil {
				inspect(buf[:n])
			}
			if cut != nil && cut.Load() {
				p.dropped.Add(1)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
