package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Close stops the client from taking new locks and waits for its background
// work: calls to stragglers, rollbacks, releases, removals from the waiting
// lines, and queued retries of them. After Close is called, Lock, TryLock
// and Extend fail at once with ErrClosed; a Lock call that is waiting fails
// with ErrClosed at once too (after its waiter leaves the lines, which Close
// waits for); Unlock still releases.
//
// Close is bounded even when ctx never ends. Once it is called, queued
// releases are retried at once and then every min(node timeout, 100ms).
// Close waits until the work is done or ctx ends, or, when ctx has no
// deadline, for at most the node timeout plus three release timeouts (350ms
// by default); give it a context with a longer deadline to wait longer for a
// node that may come back (a paused master). Then it abandons what is still
// queued (those keys, if any, expire with their TTL) and waits at most the
// node timeout plus the release timeout more for the calls in flight (each
// is bounded by its own deadline), whatever other goroutines are doing: a
// context.Background() Close returns within 500ms by default.
//
// It returns nil when every release it waited for was confirmed or needed
// no more (the node refused the connection: nothing runs there); otherwise
// an error wrapping ErrNotReleased that counts the abandoned releases per
// node, and ctx.Err() when ctx ended first. Close does not close the nodes.
// It is safe to call more than once and concurrently with other methods.
func (c *Client) Close(ctx context.Context) error {
	c.closed.Store(true)
	c.closeOnce.Do(func() { close(c.closing) })
	c.closeWatches()
	before := c.abandonedNow()
	var bound <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(c.cfg.nodeTimeout + 3*c.cfg.releaseTimeout)
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-c.work.idle():
		return c.abandonedErr(ctx, before)
	case <-ctx.Done():
	case <-bound:
	}
	c.giveUpOnce.Do(func() { close(c.giveUp) })
	t := time.NewTimer(c.cfg.nodeTimeout + c.cfg.releaseTimeout)
	defer t.Stop()
	select {
	case <-c.work.idle():
	case <-t.C:
	}
	return c.abandonedErr(ctx, before)
}

// abandonedNow returns each node's count of abandoned releases.
func (c *Client) abandonedNow() []int {
	out := make([]int, len(c.members))
	for i, m := range c.members {
		m.mu.Lock()
		out[i] = m.abandoned
		m.mu.Unlock()
	}
	return out
}

// abandonedErr returns Close's error: the releases abandoned since before
// (per node), and ctx.Err() when ctx has ended; nil when there are none and
// ctx is live.
func (c *Client) abandonedErr(ctx context.Context, before []int) error {
	var parts []string
	for i, n := range c.abandonedNow() {
		if d := n - before[i]; d > 0 {
			parts = append(parts, fmt.Sprintf("%d on %s", d, c.members[i].addr))
		}
	}
	var errs []error
	if len(parts) > 0 {
		errs = append(errs, fmt.Errorf("%w: close abandoned queued releases (%s); their keys, if any, expire with their TTL", ErrNotReleased, strings.Join(parts, ", ")))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("redlock: close: %w", err))
	}
	return errors.Join(errs...)
}

// tracker counts background goroutines. Unlike a sync.WaitGroup it may be
// waited on while new work is added (Close racing with a Lock loop).
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // made by idle while n > 0, closed when n drops to 0
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

// idle returns a channel closed when no background work is running.
func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	return t.zero
}
