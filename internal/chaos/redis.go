package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server (or redis-sentinel) process this harness
// started and may hurt: it never touches a server it did not start.
type Server struct {
	Port     int
	dir      string
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
	sentinel bool
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartRedis starts a redis-server without persistence on a free port,
// with its files under dir, and waits until it answers. extra are further
// command-line options (e.g. "--replicaof", "127.0.0.1", "6390").
func StartRedis(dir string, extra ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, "redis-"+strconv.Itoa(port))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Port: port, dir: d, args: append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", d, "--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning",
		"--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0",
	}, extra...)}
	return s, s.Start()
}

// StartSentinel starts a Sentinel (redis-server --sentinel) on a free port
// that watches the master at masterPort under name, with quorum 1, a down
// time of downAfter and its config file under dir.
func StartSentinel(dir, name string, masterPort int, downAfter time.Duration) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, "sentinel-"+strconv.Itoa(port))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nlogfile %q\n"+
		"sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s 3000\nsentinel parallel-syncs %s 1\n",
		port, d, filepath.Join(d, "sentinel.log"), name, masterPort, name, downAfter.Milliseconds(), name, name)
	path := filepath.Join(d, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	s := &Server{Port: port, dir: d, args: []string{path, "--sentinel"}, sentinel: true}
	return s, s.Start()
}

// Addr is the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Start (re)starts the process on its port, empty unless it replicates,
// and waits until it answers PING.
func (s *Server) Start() error {
	cmd := exec.Command("redis-server", s.args...)
	cmd.Stdout, cmd.Stderr = nil, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("chaos: redis-server on port %d exited at start", s.Port)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("chaos: redis-server on port %d did not answer: %w", s.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Alive reports whether the process runs.
func (s *Server) Alive() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Client returns a plain client for the harness's own commands (FLUSHALL,
// CLIENT PAUSE, REPLICAOF), never used by the library under test.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, MaxRetries: -1, PoolSize: 2})
}

// WaitSynced waits until the replica at s reports its master link up.
func (s *Server) WaitSynced(ctx context.Context) error {
	c := s.Client()
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("chaos: replica did not sync"), ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
