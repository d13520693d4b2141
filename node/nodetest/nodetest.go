// Package nodetest checks a redlock.Node implementation against what the
// coordinator of package redlock relies on, in the spirit of
// testing/fstest.TestFS: one call, Run, from a test of the implementation's
// own package.
//
//	func TestNodeContract(t *testing.T) {
//		nodetest.Run(t, func(t *testing.T) redlock.Node {
//			return newEmptyNode(t) // a fresh node whose server holds no keys
//		}, nil)
//	}
//
// The reference is a Redis master running the Lua scripts of package
// redisnode (node/redisnode/scripts/*.lua), and the suite expects what such
// a master answers, including where a lock's name meets a key the scripts
// derive from another lock's name ({k}:fence, {k}:waiting, {k}:queue,
// {k}:queue:ttl, {k}:queue:val, {k}:grant, {k}:release-guard:<hash>; see docs/nodes.md, "Checking a Node: package
// nodetest"), and where one name is used as two kinds of lock (Redis answers
// WRONGTYPE: an error, not a refusal).
//
// # What a node's errors must say
//
// The coordinator needs four things from a node's errors, and the suite
// checks each (the last one when Run is given a way to take the server
// down):
//
//   - A call returns by its context's deadline, and a call whose context
//     has ended returns an error wrapping ctx.Err() (context.Canceled or
//     context.DeadlineExceeded). The suite calls every method with an
//     ended context, and bounds every other call by a 10 s context: a node
//     that ignores it hangs the test until go test's -timeout.
//   - A failed call returns zero results (false, 0): the coordinator reads
//     no result from it.
//   - An error wrapping redlock.ErrNotSent promises that the call had no
//     effect on the server: the coordinator then skips releasing what it may
//     have taken. Wherever the suite meets such an error it checks the
//     promise. A node that cannot tell must return a plain error (the
//     coordinator then keeps releasing keys such a node may hold).
//   - A server that is down (a crashed master, a refused connection) fails
//     every call, and the same node serves again when the server is back:
//     the coordinator never rebuilds a node.
package nodetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// Run runs the suite: one subtest per behaviour, in the groups Mutex,
// Fencing, Peek, Shapes, Queue, Watch, Info, Context, Names, Kinds,
// DerivedKeys and Down.
//
// newNode is called once per subtest with that subtest's t, and must return
// a node whose server holds no keys (a new server, or one emptied), ready
// for calls; it may register its cleanup with t.Cleanup and fail t when it
// cannot build the node. Subtests run one after another, never in parallel,
// so newNode may empty and reuse one server. The Fencing checks run when the
// node is a redlock.FencingNode (its Retention checks when it is also a
// redlock.FenceExpiryNode), the Peek checks when it is a redlock.PeekNode,
// the Shapes and Kinds checks when it is a redlock.ShapeNode, the Queue and
// Watch checks when it is a redlock.QueueNode (some of them when it is also
// a ShapeNode); DerivedKeys runs the part the node's capabilities allow. The rest are
// skipped with a message that says why.
//
// down is optional: nil skips the Down checks. Otherwise down(t, n) takes
// the server of n (the node newNode returned in the same subtest) down as a
// crashed master is, connections refused, and returns up, which brings the
// server back with the data it had (persistence, or a proxy that refuses
// connections in front of a live server) and returns once it serves again.
// The suite then checks every call fails while the server is down, that an
// error wrapping redlock.ErrNotSent had no effect, and that the same node
// serves again after up (it retries a call that meets a connection left
// over from before, for up to 30 s).
//
// A failed check is reported with t.Error, naming the call, its arguments
// (long ones cut to 40 bytes) and what the reference answers; an error
// where the suite needs a result ends that subtest. Every node call is
// bounded by a 10 s context and every wait for an expiry by 30 s. Run
// takes some seconds: it waits for short TTLs to pass (250 ms, or longer
// when the machine is too slow to tell an expiry from a slow call).
//
// Call Run from t's goroutine (it calls t.Run). The node is called from
// the subtest's goroutine and, by the Concurrent checks, from 8 goroutines
// at once; every goroutine the suite starts has ended when its subtest
// returns. The Watch checks stop every watch they start before their
// subtest returns; a node that keeps goroutines for its watches until it
// is closed (package redisnode's Close) must be closed by newNode's
// cleanup, or a goroutine leak check (goleak) finds them.
func Run(t *testing.T, newNode func(t *testing.T) redlock.Node, down func(t *testing.T, n redlock.Node) (up func())) {
	t.Helper()
	run(t, newNode, down, func(t *testing.T, err error) {
		t.Helper()
		t.Error(err)
	}, nil)
}

// Timing of the suite.
const (
	callTimeout = 10 * time.Second // bounds every node call
	long        = time.Hour        // a TTL that does not end during a check
)

// waitLimit bounds every wait for an expiry (the suite's own tests shorten
// it).
var waitLimit = 30 * time.Second

// shortTTLs are the TTLs a timed check tries, in order (see checker.timed).
var shortTTLs = []time.Duration{250 * time.Millisecond, time.Second, 4 * time.Second}

// group is a named set of checks.
type group struct {
	name   string
	checks []check
}

type check struct {
	name string
	run  func(c *checker)
}

// run runs every group as a subtest of t and every check as a subtest of
// its group, reporting each failure with report (Run: t.Error; the suite's
// own tests record them). A non-nil only picks the checks to run, by group
// and check name.
func run(t *testing.T, newNode func(t *testing.T) redlock.Node, down func(t *testing.T, n redlock.Node) func(),
	report func(t *testing.T, err error), only func(group, check string) bool) {
	t.Helper()
	if newNode == nil {
		t.Fatal("nodetest: Run needs a newNode function; it is nil")
	}
	for _, g := range groups() {
		if only != nil && !slices.ContainsFunc(g.checks, func(ck check) bool { return only(g.name, ck.name) }) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, ck := range g.checks {
				if only != nil && !only(g.name, ck.name) {
					continue
				}
				t.Run(ck.name, func(t *testing.T) {
					t.Helper()
					n := newNode(t)
					if n == nil {
						t.Fatal("nodetest: newNode returned a nil redlock.Node")
					}
					errs, skip := newChecker(t, n, down).run(ck.run)
					for _, err := range errs {
						report(t, err)
					}
					if skip != "" {
						t.Skip(skip)
					}
				})
			}
		})
	}
}

// checker runs one check on one node and collects its failures. Its
// methods are for the check's goroutine only.
type checker struct {
	t     *testing.T
	ctx   context.Context
	n     redlock.Node
	f     redlock.FencingNode     // nil when n is not one
	k     redlock.FenceExpiryNode // nil when n is not one
	p     redlock.PeekNode        // nil when n is not one
	s     redlock.ShapeNode       // nil when n is not one
	qn    redlock.QueueNode       // nil when n is not one
	wn    redlock.QueueNode       // its Watch; nil when n is not a QueueNode
	down  func(t *testing.T, n redlock.Node) func()
	errs  []error
	last  string // the last call made, for messages
	seq   int    // numbers values a check makes up
	until []func()
}

func newChecker(t *testing.T, n redlock.Node, down func(t *testing.T, n redlock.Node) func()) *checker {
	c := &checker{t: t, ctx: t.Context(), n: n, down: down}
	c.f, _ = n.(redlock.FencingNode)
	c.k, _ = n.(redlock.FenceExpiryNode)
	c.p, _ = n.(redlock.PeekNode)
	c.s, _ = n.(redlock.ShapeNode)
	c.qn, _ = n.(redlock.QueueNode)
	c.wn = c.qn
	return c
}

// stopCheck ends a check (fatalf); run recovers it.
type stopCheck struct{}

// run runs f and returns the failures it recorded, and why it skipped the
// check when it did.
func (c *checker) run(f func(c *checker)) (errs []error, skip string) {
	defer func() {
		switch r := recover().(type) {
		case nil, stopCheck:
		case skipCheck:
			skip = r.why
		default:
			panic(r)
		}
		for i := len(c.until) - 1; i >= 0; i-- {
			c.until[i]()
		}
		errs = c.errs
	}()
	f(c)
	return nil, ""
}

// atEnd runs f when the check ends, also when it stops early.
func (c *checker) atEnd(f func()) { c.until = append(c.until, f) }

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) fatalf(format string, args ...any) {
	c.errorf(format, args...)
	panic(stopCheck{})
}

// want records a failure when got != want: the last call returned got.
func (c *checker) want(got, want any, why string) {
	if got != want {
		c.errorf("%s = %v, want %v: %s", c.last, got, want, why)
	}
}

// wantErr records a failure when the last call returned no error.
func (c *checker) wantErr(err error, why string) {
	if err == nil {
		c.errorf("%s returned no error, want one: %s", c.last, why)
	}
}

// callCtx bounds one node call.
func (c *checker) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, callTimeout)
}

// stopwatch returns a function that reports whether less than half of ttl
// has passed since the stopwatch was made: while it has not, a key set
// with ttl before the stopwatch started surely still lives.
func stopwatch() func(ttl time.Duration) bool {
	start := time.Now()
	return func(ttl time.Duration) bool { return time.Since(start) < ttl/2 }
}

// timed runs seq with the short TTLs in turn until a run is conclusive:
// seq returns false when the steps it timed took half the TTL or more (the
// TTL might have ended during them, so their outcome would be the clock's,
// not the node's). attempt tells the runs apart, for the keys they use.
func (c *checker) timed(seq func(ttl time.Duration, attempt string) bool) {
	for i, ttl := range shortTTLs {
		if seq(ttl, "#"+strconv.Itoa(i)) {
			return
		}
	}
	c.errorf("inconclusive: with a TTL of %v the steps before the expiry still took %v or more (last call: %s)",
		shortTTLs[len(shortTTLs)-1], shortTTLs[len(shortTTLs)-1]/2, c.last)
}

// eventually polls cond, every 2 ms at first and every 50 ms at most, until
// it holds, and stops the check when waitLimit passes first.
func (c *checker) eventually(what string, cond func() bool) {
	deadline := time.Now().Add(waitLimit)
	for d := 2 * time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			c.fatalf("%s: not within %v (last call: %s)", what, waitLimit, c.last)
		}
		tm := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			tm.Stop()
			c.fatalf("%s: test ended: %v", what, c.ctx.Err())
		case <-tm.C:
		}
	}
}

// q quotes a name or value for a message, cut to 40 bytes with its length.
func q(s string) string {
	const most = 40
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:most]) + "..." + "(" + strconv.Itoa(len(s)) + " bytes)"
}

// holdString shows a hold's non-zero fields.
func holdString(h redlock.Hold) string {
	parts := []string{"Group: " + q(h.Group), "ID: " + q(h.ID)}
	if h.Limit != 0 {
		parts = append(parts, "Limit: "+strconv.Itoa(h.Limit))
	}
	if h.Waiter != "" {
		parts = append(parts, "Waiter: "+q(h.Waiter), "WaitTTL: "+h.WaitTTL.String())
	}
	if h.Yield {
		parts = append(parts, "Yield: true")
	}
	return "Hold{" + strings.Join(parts, ", ") + "}"
}

// zero records a failure when a failed call returned a non-zero result.
func (c *checker) zero(err error, nonZero bool) {
	if err != nil && nonZero {
		c.errorf("%s returned a result besides its error %v; a failed call returns zero results (false, 0)", c.last, err)
	}
}

// must stops the check when err is not nil: the suite needed a result.
func (c *checker) must(err error) {
	if err != nil {
		c.fatalf("%s: unexpected error: %v", c.last, err)
	}
}

// The node calls: tryX makes the call and returns its error; X stops the
// check on an error. Each records itself in c.last.

func (c *checker) tryAcquire(key, value string, ttl time.Duration) (bool, error) {
	c.last = fmt.Sprintf("Acquire(%s, %s, %v)", q(key), q(value), ttl)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.n.Acquire(ctx, key, value, ttl)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) acquire(key, value string, ttl time.Duration) bool {
	ok, err := c.tryAcquire(key, value, ttl)
	c.must(err)
	return ok
}

func (c *checker) tryExtend(key, value string, ttl time.Duration) (bool, error) {
	c.last = fmt.Sprintf("Extend(%s, %s, %v)", q(key), q(value), ttl)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.n.Extend(ctx, key, value, ttl)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) extend(key, value string, ttl time.Duration) bool {
	ok, err := c.tryExtend(key, value, ttl)
	c.must(err)
	return ok
}

func (c *checker) tryRelease(key, value string, guard time.Duration) (bool, error) {
	c.last = fmt.Sprintf("Release(%s, %s, %v)", q(key), q(value), guard)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.n.Release(ctx, key, value, guard)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) release(key, value string, guard time.Duration) bool {
	ok, err := c.tryRelease(key, value, guard)
	c.must(err)
	return ok
}

// fenced is AcquireFenced's result.
type fenced struct {
	ok    bool
	fence int64
}

func (f fenced) String() string { return fmt.Sprintf("(%v, %d)", f.ok, f.fence) }

func (c *checker) tryAcquireFenced(key, value string, ttl time.Duration) (fenced, error) {
	c.last = fmt.Sprintf("AcquireFenced(%s, %s, %v)", q(key), q(value), ttl)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, fence, err := c.f.AcquireFenced(ctx, key, value, ttl)
	c.zero(err, ok || fence != 0)
	return fenced{ok, fence}, err
}

func (c *checker) acquireFenced(key, value string, ttl time.Duration) fenced {
	r, err := c.tryAcquireFenced(key, value, ttl)
	c.must(err)
	return r
}

func (c *checker) tryRaiseFence(key, value string, token int64) (bool, error) {
	c.last = fmt.Sprintf("RaiseFence(%s, %s, %d)", q(key), q(value), token)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.f.RaiseFence(ctx, key, value, token)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) raiseFence(key, value string, token int64) bool {
	ok, err := c.tryRaiseFence(key, value, token)
	c.must(err)
	return ok
}

func (c *checker) tryAcquireHold(key string, h redlock.Hold, ttl time.Duration) (int, error) {
	c.last = fmt.Sprintf("AcquireHold(%s, %s, %v)", q(key), holdString(h), ttl)
	ctx, cancel := c.callCtx()
	defer cancel()
	n, err := c.s.AcquireHold(ctx, key, h, ttl)
	c.zero(err, n != 0)
	if err == nil && n < 0 {
		c.errorf("%s = %d: a hold count is never negative (0 is a refusal)", c.last, n)
	}
	return n, err
}

func (c *checker) acquireHold(key string, h redlock.Hold, ttl time.Duration) int {
	n, err := c.tryAcquireHold(key, h, ttl)
	c.must(err)
	return n
}

func (c *checker) tryExtendHold(key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	c.last = fmt.Sprintf("ExtendHold(%s, %s, %v)", q(key), holdString(h), ttl)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.s.ExtendHold(ctx, key, h, ttl)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) extendHold(key string, h redlock.Hold, ttl time.Duration) bool {
	ok, err := c.tryExtendHold(key, h, ttl)
	c.must(err)
	return ok
}

func (c *checker) tryReleaseHold(key string, h redlock.Hold, guard time.Duration) (bool, error) {
	c.last = fmt.Sprintf("ReleaseHold(%s, %s, %v)", q(key), holdString(h), guard)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.s.ReleaseHold(ctx, key, h, guard)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) releaseHold(key string, h redlock.Hold, guard time.Duration) bool {
	ok, err := c.tryReleaseHold(key, h, guard)
	c.must(err)
	return ok
}

func (c *checker) tryInfo() (redlock.ServerInfo, error) {
	c.last = "Info()"
	ctx, cancel := c.callCtx()
	defer cancel()
	si, err := c.n.Info(ctx)
	c.zero(err, si.RunID != "" || si.Uptime != 0 || si.Settings != nil)
	return si, err
}

// isNotSent reports whether err claims the call never reached the server.
func isNotSent(err error) bool { return errors.Is(err, redlock.ErrNotSent) }
