// Package clock puts time behind an interface so that lock validity can be
// measured on a monotonic clock in production and advanced by hand in tests.
//
// Real is the production clock: its readings carry Go's monotonic clock, so
// Since and Sub are immune to wall-clock jumps (NTP steps, manual changes).
// Fake is a manually advanced clock for deterministic tests.
//
// Both implementations are safe for concurrent use by multiple goroutines.
package clock

import "time"

// Clock is the time source used by the lock coordinator.
type Clock interface {
	// Now returns the current time. Readings from Real carry a monotonic
	// component, so differences between them are not affected by wall-clock
	// jumps.
	Now() time.Time
	// Since returns the time elapsed since t (Now().Sub(t)).
	Since(t time.Time) time.Duration
	// After returns a channel that receives the current time once d has
	// elapsed on this clock. A d <= 0 fires immediately.
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock. The zero value is ready to use.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now(), which includes a monotonic clock reading.
func (Real) Now() time.Time { return time.Now() }

// Since returns time.Since(t); it uses the monotonic reading when t has one.
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
