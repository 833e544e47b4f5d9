package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/reconcile"
)

// fixes counts what the shop's reconciler corrected: while the breaker
// recalibrated the gate (after an outage), and otherwise during the sale
// (the repairs of the SKUs the breaker's fallback took orders of, or
// whose drift the flow reported). The closing pass is counted apart.
type fixes struct {
	recalibrated, repaired atomic.Int64 // units
	final                  atomic.Bool
	during                 func() bool // reports whether a recalibration is running
}

func (f *fixes) note(c reconcile.Correction) {
	switch {
	case f.final.Load():
	case f.during != nil && f.during():
		f.recalibrated.Add(abs(c.Delta))
	default:
		f.repaired.Add(abs(c.Delta))
	}
}

// breakerLog keeps what the breaker did, for the report. note runs on the
// breaker's event goroutine.
type breakerLog struct {
	start          time.Time
	trips          atomic.Int64
	recalibrations atomic.Int64
	state          atomic.Int64 // the breaker's degrade.State now
	redisDown      atomic.Bool  // -chaos has Redis stopped

	mu     sync.Mutex
	states []string
}

func (b *breakerLog) note(e degrade.Event) {
	b.state.Store(int64(e.To))
	switch {
	case e.To == degrade.Degraded && (e.From == degrade.Primary || e.From == degrade.Ramping):
		b.trips.Add(1)
	case e.To == degrade.Recalibrating:
		b.recalibrations.Add(1)
	}
	s := "breaker " + e.To.String()
	switch {
	case e.To == degrade.Ramping:
		s += fmt.Sprintf(" %.0f%%", 100*e.Share)
	case e.Err != nil:
		s += " (recalibration failed: " + e.Err.Error() + ")"
	}
	b.at(e.At, s)
}

// event notes something that happens now.
func (b *breakerLog) event(s string) { b.at(time.Now(), s) }

// at notes something that happened at t, with the time since the start.
func (b *breakerLog) at(t time.Time, s string) {
	s = fmt.Sprintf("%5.2fs %s", t.Sub(b.start).Seconds(), s)
	b.mu.Lock()
	b.states = append(b.states, s)
	b.mu.Unlock()
}

func (b *breakerLog) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.states...)
}
