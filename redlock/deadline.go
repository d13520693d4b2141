package redlock

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is a round's shared deadline over a parent context that never
// ends (its Done is nil): context.WithDeadline without the allocations of a
// separate context and of its cancel function (it lives in the round), for
// the common case of a caller passing context.Background. Done closes at the
// deadline (Err: context.DeadlineExceeded) or when the round's last call
// stops it (Err: context.Canceled), whichever is first.
type deadlineCtx struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer

	mu    sync.Mutex
	err   error
	after []*afterFunc // AfterFunc registrations (a child context's)
}

var _ context.Context = (*deadlineCtx)(nil)

// init starts the deadline; parent.Done() must be nil.
func (c *deadlineCtx) init(parent context.Context, deadline time.Time) {
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.parent, c.deadline = parent, deadline
	c.done = make(chan struct{})
	c.timer = time.AfterFunc(time.Until(deadline), c.expire)
}

func (c *deadlineCtx) expire() { c.end(context.DeadlineExceeded) }

// stop ends the context early (the round's calls are done).
func (c *deadlineCtx) stop() {
	c.timer.Stop()
	c.end(context.Canceled)
}

func (c *deadlineCtx) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	after := c.after
	c.after = nil
	c.mu.Unlock()
	for _, a := range after {
		go a.f()
	}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// afterFunc is one AfterFunc registration.
type afterFunc struct{ f func() }

// AfterFunc arranges for f to run in its own goroutine once c is done, and
// returns a function that unregisters it (true if it did so before f was
// started). The context package uses it to propagate the end of c to a
// child context without a goroutine of its own.
func (c *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.after = append(c.after, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.after {
			if x == a {
				c.after = append(c.after[:i], c.after[i+1:]...)
				return true
			}
		}
		return false
	}
}
