package history

import "time"

// RefClock is the one reference monotonic clock of a run on real time:
// every event of every client is timestamped with it, as a duration since
// the clock's start. It reads Go's monotonic clock, so wall-clock changes
// on the host do not affect it. It is safe for concurrent use.
type RefClock struct{ base time.Time }

// NewRefClock returns a clock that reads zero now.
func NewRefClock() *RefClock { return &RefClock{base: time.Now()} }

// Now returns the time elapsed since the clock's start.
func (c *RefClock) Now() time.Duration { return time.Since(c.base) }

// Of converts a reading of the real clock (a time.Time carrying a
// monotonic reading, such as redlock.Lease.Until) to this clock.
func (c *RefClock) Of(t time.Time) time.Duration { return t.Sub(c.base) }
