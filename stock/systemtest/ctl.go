package systemtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/stockguard/stockguard/stock"
)

// fault is what the checker does to one call at one hand-off.
type fault uint8

const (
	noFault      fault = iota
	gateDown           // the k-th gate call fails before it is sent
	gateLost           // the k-th gate call runs, its reply is lost
	recordDown         // the k-th record call fails before it is sent
	recordLost         // the k-th record call runs, its reply is lost
	recordRefuse       // the k-th record Deduct is refused as sold out, unapplied
	nodeDies           // the node dies before its k-th tier call
	nodeParks          // the call stops before its k-th tier call until resumed
	redisLost          // the k-th Redis command runs, its reply is lost
	redisResend        // the k-th Redis command is sent twice (a client retry)
	redisDies          // the node dies before its k-th Redis command
	redisParks         // the call stops before its k-th Redis command until resumed
)

var faultNames = [...]string{"", "gate-down", "gate-lost", "record-down", "record-lost",
	"record-refuses", "dies", "parks", "redis-lost", "redis-resend", "redis-dies", "redis-parks"}

func (f fault) String() string { return faultNames[f] }

// atRedis reports whether the fault counts Redis commands.
func (f fault) atRedis() bool { return f >= redisLost }

// action is what a hand-off point does with the call reaching it.
type action uint8

const (
	proceed action = iota
	failBefore
	loseReply
	resend
	refuse
)

// errInjected is wrapped by every error the checker injects.
var errInjected = errors.New("systemtest: injected fault")

// timeoutError is the injected read timeout: the request was sent and no
// reply came.
type timeoutError struct{}

func (timeoutError) Error() string   { return "systemtest: injected read timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return errInjected }

// downErr is a request that never left: nothing was applied.
func downErr() error { return &net.OpError{Op: "dial", Net: "tcp", Err: errInjected} }

// lostErr is a request that was sent and whose reply was lost.
func lostErr() error { return &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}} }

// plan is one fault of a call: f applies at the at-th point of its kind.
type plan struct {
	f     fault
	at    int
	fired bool
}

// ctl is the fault plan and the record of one call the checker makes; it
// travels in the call's context to every hand-off point.
type ctl struct {
	mu     sync.Mutex
	plans  []plan
	dead   bool
	counts map[string]int
	points []string
	cancel context.CancelFunc

	parked chan struct{} // receives once when the call parks
	resume chan bool     // true: go on; false: the node dies
}

type ctlKey struct{}

func newCtl(plans ...plan) *ctl {
	return &ctl{plans: plans, counts: map[string]int{}, parked: make(chan struct{}, 1), resume: make(chan bool)}
}

func ctlFrom(ctx context.Context) *ctl {
	c, _ := ctx.Value(ctlKey{}).(*ctl)
	return c
}

// faulty reports whether the call has any fault planned.
func (c *ctl) faulty() bool { return len(c.plans) > 0 }

// has reports whether one of the call's faults is f.
func (c *ctl) has(fs ...fault) bool {
	for _, p := range c.plans {
		for _, f := range fs {
			if p.f == f {
				return true
			}
		}
	}
	return false
}

// counter is the kind of point a fault counts, and the action it takes.
func (f fault) counter() (kind string, act action) {
	switch f {
	case gateDown:
		return "gate", failBefore
	case gateLost:
		return "gate", loseReply
	case recordDown:
		return "record", failBefore
	case recordLost:
		return "record", loseReply
	case recordRefuse:
		return "record.Deduct", refuse
	case nodeDies, nodeParks:
		return "tier", failBefore
	case redisLost:
		return "redis", loseReply
	case redisResend:
		return "redis", resend
	}
	return "redis", failBefore
}

// tierPoint is the hand-off before a call to one tier's method.
func (c *ctl) tierPoint(tier, method string) action {
	return c.point(tier+"."+method, "tier", tier, tier+"."+method)
}

// redisPoint is the hand-off before a Redis command (or pipeline).
func (c *ctl) redisPoint(name string) action {
	return c.point("redis."+name, "redis")
}

// point counts the hand-off under each of kinds and applies the first
// planned fault whose point it is.
func (c *ctl) point(label string, kinds ...string) action {
	c.mu.Lock()
	if c.dead {
		c.points = append(c.points, label+"(dead)")
		c.mu.Unlock()
		return failBefore
	}
	for _, k := range kinds {
		c.counts[k]++
	}
	for i := range c.plans {
		p := &c.plans[i]
		kind, act := p.f.counter()
		if p.fired || c.counts[kind] != p.at || !slices.Contains(kinds, kind) {
			continue
		}
		p.fired = true
		c.points = append(c.points, label+"!"+p.f.String())
		f := p.f
		c.mu.Unlock()
		switch f {
		case nodeDies, redisDies:
			c.die()
			return failBefore
		case nodeParks, redisParks:
			c.parked <- struct{}{}
			if !<-c.resume {
				c.die()
				return failBefore
			}
			return proceed
		}
		return act
	}
	c.points = append(c.points, label)
	c.mu.Unlock()
	return proceed
}

// die makes every later hand-off of the call fail before it is sent and
// ends its context: the node stopped.
func (c *ctl) die() {
	c.mu.Lock()
	c.dead = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *ctl) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// path lists the hand-off points the call passed, the faulted one marked.
func (c *ctl) path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.points) > 12 {
		return strings.Join(c.points[:12], " ") + fmt.Sprintf(" …(+%d)", len(c.points)-12)
	}
	return strings.Join(c.points, " ")
}

// refusal is the business refusal injected at the record.
func refusal(skus []string) error {
	sku := ""
	if len(skus) > 0 {
		sku = skus[0]
	}
	return &stock.SKUError{SKU: sku, Err: fmt.Errorf("%w (%w)", stock.ErrSoldOut, errInjected)}
}
