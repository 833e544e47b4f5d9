package limiter_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/limiter"
)

// stallClock is a Clock whose next read can be held back after it is taken,
// as when a goroutine is preempted between reading the clock and deciding.
type stallClock struct {
	mu      sync.Mutex
	t       time.Time
	stall   bool
	read    chan struct{}
	release chan struct{}
}

func (c *stallClock) Now() time.Time {
	c.mu.Lock()
	t, stall := c.t, c.stall
	c.stall = false
	c.mu.Unlock()
	if stall {
		close(c.read)
		<-c.release
	}
	return t
}

func (c *stallClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// A Local bucket never goes back in time: a call that read the clock
// before another call on the same key decided is decided at the later
// time, so no refill is counted twice. Calls read at t0, t0+0.5s, t0+1s
// (decided before the t0+0.5s one) and t0+1.5s on Rate 1/s, Burst 2 admit
// at most 3 (2 + 1.5 s of refill).
func TestLocalStaleClockReadDoesNotOveradmit(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &stallClock{t: t0, read: make(chan struct{}), release: make(chan struct{})}
	l, err := limiter.NewLocal(limiter.LocalConfig{Limit: limiter.Limit{Rate: 1, Period: time.Second, Burst: 2}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	allow := func() bool {
		d, err := l.Allow(bg, "k")
		if err != nil {
			t.Error(err)
		}
		return d.Allowed
	}
	if allow() { // t0
		allowed++
	}
	clock.set(t0.Add(500 * time.Millisecond))
	clock.mu.Lock()
	clock.stall = true
	clock.mu.Unlock()
	res := make(chan bool)
	go func() { res <- allow() }() // reads t0+0.5s, then stalls
	<-clock.read
	clock.set(t0.Add(time.Second))
	if allow() { // t0+1s, decided first
		allowed++
	}
	close(clock.release)
	if <-res { // t0+0.5s, decided second
		allowed++
	}
	clock.set(t0.Add(1500 * time.Millisecond))
	if allow() { // t0+1.5s
		allowed++
	}
	if allowed > 3 {
		t.Fatalf("calls read at t0, t0+0.5s, t0+1s, t0+1.5s on Rate 1/s, Burst 2: %d allowed; at most 3 may be (2 + 1.5 s of refill)", allowed)
	}
}
