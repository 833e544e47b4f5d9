package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// check starts clusters of 1, 2 and 3 redis-server masters, runs B = N on
// each and prints the measured orders/s beside the model's.
func check(ctx context.Context, opt options, tag string, r3, r1 *loadResult, stdout, stderr io.Writer) error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("-check: %w", err)
	}
	_, terr := exec.LookPath("taskset")
	ncpu := runtime.NumCPU()
	pin := terr == nil && ncpu >= 2
	layout := "not pinned (taskset missing or a single CPU)"
	if pin {
		if err := exec.Command("taskset", "-a", "-p", "-c", "1", strconv.Itoa(os.Getpid())).Run(); err != nil {
			return fmt.Errorf("-check: pinning the client to CPU 1: %w", err)
		}
		layout = "every redis-server pinned to CPU 0, this command (client) to CPU 1"
	}
	var rows []*loadResult
	for n := 1; n <= 3; n++ {
		fmt.Fprintf(stderr, "scale: -check, %d masters\n", n)
		r, err := checkRun(ctx, opt, tag, n, pin)
		if err != nil {
			return fmt.Errorf("-check, %d masters: %w", n, err)
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(stdout, "### 3b. Check: own clusters of N redis-server masters (ports %d..), B = N, %d clients, %v; %d CPUs, %s\n\n",
		opt.checkPort, opt.clients, opt.duration, ncpu, layout)
	fmt.Fprintln(stdout, "| N | measured orders/s | paper T_N (table 3) | this run: 1 / max c_m | this machine: min(cores for servers / Σc_m, 1 / client µs) | CPU use per master (core-s/s) | client CPU use | other processes' CPU (cores) | limited by |")
	fmt.Fprintln(stdout, "|---:|---:|---:|---:|---:|---|---:|---:|---|")
	serverCores := 1.0
	if !pin {
		serverCores = float64(ncpu)
	}
	for _, r := range rows {
		n := r.buckets
		paper := r3
		if n == 1 {
			paper = r1
		}
		secs := r.elapsed.Seconds()
		var use []string
		busiestUse := 0.0
		for _, m := range r.masters {
			u := r.cpu[m] / 1e6 / secs
			busiestUse = max(busiestUse, u)
			use = append(use, fmt.Sprintf("%.2f", u))
		}
		clientPer := r.clientCPU / float64(max(r.orders, 1))
		machine := min(serverCores*modelRate(r.cpuPerOrder()), modelRate(clientPer))
		_, busy := r.busiest()
		limit := "client CPU"
		switch {
		case busiestUse >= 0.9:
			limit = "busiest master's core"
		case pin && r.totalCPU()/1e6/secs >= 0.9:
			limit = "the one server core (shared)"
		case r.clientCPU/1e6/secs < 0.9:
			limit = "neither saturated: waiting (round trips, batching, CPU taken by other processes)"
		}
		fmt.Fprintf(stdout, "| %d | %.0f | %s | %s | %s | %s | %.2f | %s | %s |\n", n, float64(r.orders)/secs,
			rate(float64(n)*modelRate(paper.cpuPerOrder())), rate(modelRate(busy)), rate(machine), strings.Join(use, ", "), r.clientCPU/1e6/secs, r.others(), limit)
	}
	fmt.Fprintln(stdout)
	if pin {
		fmt.Fprintln(stdout, "With 2 CPUs the servers share one core, so N masters cannot reach N cores' worth: this check shows whether")
		fmt.Fprintln(stdout, "the model's per-order cost holds (measured vs \"this machine\"), not the N-fold scaling itself.")
	} else {
		fmt.Fprintln(stdout, "Nothing pinned: servers and client share every CPU; compare measured with \"this machine\".")
	}
	return nil
}

// checkRun starts n masters, runs the load with B = n and stops them.
func checkRun(ctx context.Context, opt options, tag string, n int, pin bool) (*loadResult, error) {
	dir, err := os.MkdirTemp("", "sgscale")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ports := make([]int, n)
	for i := range ports {
		ports[i] = opt.checkPort + i
		for _, p := range []int{ports[i], ports[i] + 10000} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				return nil, fmt.Errorf("port %d is not free: %w", p, err)
			}
			l.Close()
		}
	}
	var pids []int
	defer func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGTERM)
		}
		for _, pid := range pids {
			for k := 0; k < 100 && syscall.Kill(pid, 0) == nil; k++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	var addrs []string
	for _, p := range ports {
		ps := strconv.Itoa(p)
		args := []string{"--port", ps, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes-"+ps+".conf"), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "yes",
			"--pidfile", filepath.Join(dir, ps+".pid"), "--logfile", filepath.Join(dir, ps+".log")}
		name := "redis-server"
		if pin {
			name, args = "taskset", append([]string{"-c", "0", "redis-server"}, args...)
		}
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("redis-server :%d: %w: %s", p, err, out)
		}
		pid, err := readPid(filepath.Join(dir, ps+".pid"))
		if err != nil {
			return nil, fmt.Errorf("redis-server :%d: %w", p, err)
		}
		pids = append(pids, pid)
		addrs = append(addrs, "127.0.0.1:"+ps)
	}
	if err := formCluster(ctx, addrs); err != nil {
		return nil, err
	}
	t, err := dial(ctx, addrs, fmt.Sprintf("own %d-master", n))
	if err != nil {
		return nil, err
	}
	defer t.close(ctx, tag)
	return t.load(ctx, tag+"c"+strconv.Itoa(n), n, opt.clients, opt.duration)
}

// readPid waits for a daemonized redis-server's pid file.
func readPid(path string) (int, error) {
	for range 100 {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, errors.New("no pid file")
}

// formCluster gives each node the slots redis-cli --cluster create would
// (which refuses fewer than 3 masters, hence by hand), makes them meet and
// waits for the cluster to be up on every node.
func formCluster(ctx context.Context, addrs []string) error {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a})
		defer cs[i].Close()
	}
	for i, r := range sliceSlots(len(addrs)) {
		if err := cs[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", r[0], r[1]).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE: %w", addrs[i], err)
		}
		if err := cs[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", addrs[i], err)
		}
	}
	for _, a := range addrs[1:] {
		host, port, _ := net.SplitHostPort(a)
		if err := cs[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", a, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		up := true
		for _, c := range cs {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(addrs))+"\r\n") {
				up = false
			}
		}
		if up {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the cluster did not come up in 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
