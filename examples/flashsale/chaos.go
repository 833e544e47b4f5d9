package main

import (
	"io"
	"net"
	"sync"
	"time"
)

// proxy is a TCP proxy in front of a real Redis that -chaos can cut: stop
// closes the listener and every connection, start listens again on the same
// address.
type proxy struct {
	target string
	laddr  string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newProxy(target string) (*proxy, error) {
	p := &proxy{target: target, laddr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proxy) addr() string { return p.laddr }

func (p *proxy) start() error {
	ln, err := net.Listen("tcp", p.laddr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.laddr = ln, ln.Addr().String()
	p.mu.Unlock()
	go p.accept(ln)
	return nil
}

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done
	_ = c.Close()
	_ = s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// stop cuts every connection and stops listening.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) close() { p.stop() }

// chaos stops Redis once 40% of the sale's time has passed and starts it
// again after down, noting both in log. Orders that reach the gate
// meanwhile fail until the breaker opens and sends them to the database;
// the queue consumers and the reclaimer wait for Redis and catch up. It
// returns what happened once done is closed or Redis is back.
func chaos(sw redisSwitch, log *breakerLog, sale, down time.Duration, done <-chan struct{}) <-chan chaosReport {
	out := make(chan chaosReport, 1)
	go func() {
		var rep chaosReport
		defer func() { out <- rep }()
		select {
		case <-done:
			return
		case <-time.After(sale * 4 / 10):
		}
		t0 := time.Now()
		log.event("redis stopped")
		log.redisDown.Store(true)
		sw.stop()
		time.Sleep(down)
		for sw.start() != nil {
			time.Sleep(50 * time.Millisecond)
		}
		log.redisDown.Store(false)
		rep.RedisDownS = round(time.Since(t0).Seconds(), 2)
		log.event("redis back")
	}()
	return out
}
