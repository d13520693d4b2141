package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a clock that only moves when Advance or Set is called. It is meant
// for deterministic tests of validity arithmetic and retry schedules.
//
// Create one with NewFake; the zero value is not usable. A Fake is safe for
// concurrent use by multiple goroutines.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	// cond is signalled when a timer is registered (BlockUntilWaiters).
	cond *sync.Cond
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake reading start. A zero start is replaced by a fixed,
// arbitrary instant (2020-01-01T00:00:00Z) so that tests are reproducible.
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	f := &Fake{now: start}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// After returns a channel that fires once the fake time reaches Now()+d.
// The channel has a buffer of one, so an unread timer never blocks Advance.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), ch: ch})
	f.cond.Broadcast()
	return ch
}

// Advance moves the clock forward by d (d must not be negative) and fires
// every timer whose deadline has been reached, in deadline order.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with negative duration " + d.String())
	}
	f.mu.Lock()
	f.setLocked(f.now.Add(d))
	f.mu.Unlock()
}

// Set moves the clock to t, which must not be before the current fake time,
// and fires due timers like Advance.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		panic("clock: Fake.Set to " + t.String() + " which is before " + f.now.String())
	}
	f.setLocked(t)
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}

// Waiters returns how many After timers are pending.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntilWaiters blocks until at least n After timers are pending. Tests
// use it to advance the clock only once the code under test is waiting,
// instead of sleeping.
func (f *Fake) BlockUntilWaiters(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.waiters) < n {
		f.cond.Wait()
	}
}
