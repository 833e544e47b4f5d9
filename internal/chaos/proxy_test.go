package chaos_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/chaos"
)

// echo starts a server that answers each line with prefix + the line and
// counts the lines it received.
func echo(t *testing.T, prefix string) (addr string, got chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	got = make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got <- line
					if _, err := io.WriteString(c, prefix+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

func ask(t *testing.T, c net.Conn, line string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestProxyForwardsAndSwitches(t *testing.T) {
	a, _ := echo(t, "a:")
	b, _ := echo(t, "b:")
	p, err := chaos.NewProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	if got, err := ask(t, c, "x"); err != nil || got != "a:x\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.SetUpstream(b)
	if got, err := ask(t, c, "y"); err != nil || got != "a:y\n" {
		t.Fatalf("an open connection keeps its server: %q, %v", got, err)
	}
	p.CutAll()
	if _, err := ask(t, c, "z"); err == nil {
		t.Fatal("a cut connection still answers")
	}
	c2 := dial(t, p.Addr())
	if got, err := ask(t, c2, "w"); err != nil || got != "b:w\n" {
		t.Fatalf("after the switch: %q, %v", got, err)
	}
}

func TestProxyDropsReplyAfterForwarding(t *testing.T) {
	a, got := echo(t, "a:")
	p, err := chaos.NewProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.DropReplies(func(b []byte) bool { return strings.Contains(string(b), "COMMIT") })
	c := dial(t, p.Addr())
	if r, err := ask(t, c, "select"); err != nil || r != "a:select\n" {
		t.Fatalf("a request that does not match: %q, %v", r, err)
	}
	<-got
	if r, err := ask(t, c, "COMMIT"); err == nil {
		t.Fatalf("the reply to COMMIT arrived: %q", r)
	}
	select {
	case line := <-got:
		if line != "COMMIT\n" {
			t.Fatalf("server got %q", line)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the request never reached the server")
	}
	if n := p.Dropped(); n != 1 {
		t.Fatalf("Dropped = %d, want 1", n)
	}
}

func TestProxyPause(t *testing.T) {
	a, _ := echo(t, "a:")
	p, err := chaos.NewProxy(a)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	if _, err := ask(t, c, "x"); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	_, _ = io.WriteString(c, "y\n")
	buf := make([]byte, 16)
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("a paused proxy forwarded: %q", buf[:n])
	}
	p.Resume()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if r, err := bufio.NewReader(c).ReadString('\n'); err != nil || r != "a:y\n" {
		t.Fatalf("after Resume: %q, %v", r, err)
	}
}
