package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// ChildEnv is the variable that makes a process the application of the
// app-kill cell: a program that runs the matrix calls ChildMain first
// thing when it is set (the test binary does, from TestMain).
const ChildEnv = "STOCKGUARD_CHAOS_CHILD"

// childConfig is what a child process is told, as JSON in ChildEnv.
type childConfig struct {
	Stack     StackConfig
	Sale      SaleConfig
	TimeoutMs int64
	Journal   string
	RunMs     int64
	// Resume are the orders whose Deduct the killed process left without
	// an answer: the process taking over repeats them with the same IDs.
	Resume []stock.Order
}

// ChildMain runs the application of the app-kill cell as ChildEnv says:
// a node with its reclaimer and reconciler, and buyers, for the time it
// is given (unless killed first), every call written to its journal. It
// returns the process's exit code.
func ChildMain() int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(os.Getenv(ChildEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	h, err := NewHistory(cfg.Journal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	defer h.Close()
	cfg.Stack.History = h
	s, err := Build(cfg.Stack)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	defer s.Close()
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	background(bg, &wg, s)
	d := time.Duration(cfg.TimeoutMs) * time.Millisecond
	cfg.Sale.Timeout = func(*mrand.Rand) time.Duration { return d }
	r := mrand.New(mrand.NewPCG(cfg.Sale.Seed, 99))
	var resumed sync.WaitGroup
	for _, o := range cfg.Resume {
		if Call(r, cfg.Sale, h, "deduct", o, func(c context.Context) error { return s.Top.Deduct(c, o) }) == ClassOK {
			resumed.Add(1)
			go func(seed uint64) {
				defer resumed.Done()
				after(mrand.New(mrand.NewPCG(seed, 1)), s.Top, cfg.Sale, h, o)
			}(r.Uint64())
		}
	}
	sale, end := context.WithTimeout(context.Background(), time.Duration(cfg.RunMs)*time.Millisecond)
	Play(sale, s.Top, cfg.Sale, h)
	resumed.Wait()
	end()
	stop()
	wg.Wait()
	return 0
}

// playAppKill starts the application as a child process four times: the
// first three are killed with -9 mid-sale, the fourth takes over and ends
// its sale normally. The history is their journals, in order.
func playAppKill(e *Env) ([]Event, error) {
	self := e.Opts.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	var events []Event
	var resume []stock.Order
	for i := range 4 {
		cfg := childConfig{Stack: e.Config, Sale: e.Sale, TimeoutMs: 500,
			Journal: filepath.Join(e.Dir, "journal-"+strconv.Itoa(i)+".jsonl"), RunMs: 3600_000, Resume: resume}
		cfg.Stack.History = nil
		cfg.Sale.Timeout = nil
		cfg.Sale.IDPrefix += "p" + strconv.Itoa(i)
		cfg.Sale.Seed += uint64(i)
		last := i == 3
		if last {
			cfg.RunMs = e.gap().Milliseconds()
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		out, err := os.Create(filepath.Join(e.Dir, "child-"+strconv.Itoa(i)+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), ChildEnv+"="+string(b))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			out.Close()
			return nil, err
		}
		if last {
			err = cmd.Wait()
		} else {
			// Killed once its journal shows the sale under way, a gap later.
			waitJournal(cfg.Journal, 10*time.Second)
			time.Sleep(e.gap())
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			err = nil
		}
		out.Close()
		if err != nil {
			log, _ := os.ReadFile(out.Name())
			return nil, fmt.Errorf("app process %d: %w: %s", i, err, log)
		}
		got, err := ReadJournal(cfg.Journal)
		if err != nil {
			return nil, err
		}
		resume = inFlight(got)
		e.logf("app process %d: %d events, %d orders left without an answer", i, len(got), len(resume))
		events = append(events, got...)
	}
	return events, nil
}

// inFlight returns the orders whose Deduct has no answer in events.
func inFlight(events []Event) []stock.Order {
	placed := map[string]stock.Order{}
	open := map[string]bool{}
	var ids []string
	for _, e := range events {
		if e.Op != "deduct" {
			continue
		}
		if e.Items != nil {
			placed[e.ID] = stock.Order{ID: e.ID, UserID: e.User, Items: e.Items}
			ids = append(ids, e.ID)
		}
		open[e.ID] = e.Class == ""
	}
	var out []stock.Order
	for _, id := range ids {
		if open[id] {
			out = append(out, placed[id])
		}
	}
	return out
}

// waitJournal waits until path has some bytes, or d passes.
func waitJournal(path string, d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
	}
}
