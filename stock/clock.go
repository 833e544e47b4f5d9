package stock

import "time"

// Clock tells a backend the time. Deadlines are computed from it when a hold
// is placed and compared with it when holds are confirmed or reclaimed, so
// the nodes of one shop should keep their clocks in sync (NTP); skew only
// moves the moment an unpaid hold is returned.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock. Backends use it when given no Clock.
var SystemClock Clock = ClockFunc(time.Now)
