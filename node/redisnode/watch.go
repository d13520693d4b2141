package redisnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.QueueNode = (*Node)(nil)

// Health checks of the watch connection: after watchCheck without a reply
// the reader sends a PING, and a connection that answers nothing within
// watchPingTimeout after it is closed and dialed again (go-redis then
// subscribes its channels again). watchRetry bounds the pause between
// failed dials.
const (
	watchCheck       = 3 * time.Second
	watchPingTimeout = 3 * time.Second
	watchRetry       = time.Second
)

// Watch calls fn each time a Release or ReleaseHold on this node removes
// key's value or one of its holds, or LeaveQueue lets the next waiter go,
// with the first live waiter of key's line ("" when there is none; see
// AcquireQueued), followed by a newline and the value when the release
// handed it the key (the scripts publish it so). Expiries are not reported. The notifications are
// Redis pub/sub messages on the channel "{key}:released" ("key:released"
// when key has a hash tag), or that channel followed by ":" and group for a
// watch of a group (a notification naming a waiter whose ID has a group,
// "group.rest", goes to its group's channel: see redlock.QueueNode.Watch), which
// the release scripts publish; they can be lost or late. After the
// connection broke and go-redis subscribed the channel again, fn hears
// wire.Resync (a lone newline): what was published meanwhile is lost, so
// the watcher should look again (redlock.QueueNode.Watch).
// group must not contain a newline.
//
// Every watch of the Node shares one go-redis PubSub connection, opened by
// the first Watch, and one goroutine that reads it and calls the fns, until
// Close: fn must not block (a short-lived goroutine writes each new
// channel's SUBSCRIBE, so that Watch returns by its context). A channel is subscribed by its first watcher and
// unsubscribed after its last one stopped. The goroutine pings a quiet
// connection and dials again when it gets no answer, so a paused or dead
// server costs lost notifications, never a stuck watch.
//
// Watch returns once the server confirmed the subscription, so a release
// that runs after Watch returned is reported. It fails when ctx ends first
// (the error wraps ctx.Err()), when the server refuses (an ACL user without
// channel permissions, Redis 7's default: the error wraps
// redlock.ErrNodeDenied and the NOPERM reply and names the node), or when
// the Node is closed. stop ends the watch without waiting for the network;
// it may be called more than once. A notification being delivered while
// stop runs may still call fn once. It implements redlock.QueueNode.
func (n *Node) Watch(ctx context.Context, key, group string, fn func(next string)) (stop func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("redisnode: %s: Watch of key %s with a nil fn", n.addr, quote(key))
	}
	if strings.ContainsRune(group, '\n') {
		return nil, fmt.Errorf("redisnode: %s: %w: Watch of key %s: group %s contains a newline", n.addr, redlock.ErrNotSent, quote(key), quote(group))
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	channel := wire.Channel(key, group)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisnode: %s: watch %s: %w", n.addr, quote(key), err)
	}
	w := n.watch
	c, id, err := w.add(n.client, channel, fn)
	if err != nil {
		return nil, fmt.Errorf("redisnode: %s: watch %s: %w", n.addr, quote(key), err)
	}
	stop = w.stopFunc(c, id)
	select {
	case <-c.ready:
	case <-ctx.Done():
		stop()
		return nil, fmt.Errorf("redisnode: %s: watch %s: %w", n.addr, quote(key), ctx.Err())
	}
	if c.err != nil {
		stop()
		return nil, n.watchError(c.err)
	}
	return stop, nil
}

// watchError classifies the reason a subscription failed as n.do does: a
// denial wraps redlock.ErrNodeDenied and names the node.
func (n *Node) watchError(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && denied(rerr) {
		return &deniedError{addr: n.addr, reply: rerr}
	}
	return fmt.Errorf("redisnode: %s: watch: %w", n.addr, err)
}

// watcher is the release notifications of one Node: one PubSub shared by
// every watched channel, made by the first Watch, one goroutine reading it
// (read), and a short-lived one per new subscription (subscribe). The zero
// watcher is ready for use.
type watcher struct {
	// sem is held while a SUBSCRIBE or UNSUBSCRIBE is decided and written,
	// so that the SUBSCRIBEs are written in the order of pending and a
	// channel is never unsubscribed after a new watcher subscribed it.
	sem chan struct{}

	mu      sync.Mutex
	ps      *redis.PubSub // nil until the first Watch
	closed  bool          // by Node.Close
	ended   bool          // the reader found the client closed (by its owner)
	chans   map[string]*watchChan
	pending []*watchChan        // SUBSCRIBEs written, not yet answered, oldest first
	unsub   map[string]struct{} // channels to unsubscribe when nobody watches them
	nextID  uint64
	quit    chan struct{}  // closed by close
	done    chan struct{}  // closed when read returns
	writers sync.WaitGroup // subscribe's goroutines
}

// watchChan is one subscribed channel and its watchers.
type watchChan struct {
	name  string
	fns   map[uint64]func(string)
	ready chan struct{} // closed once the server answered the SUBSCRIBE
	err   error         // the server's refusal, set before ready is closed
	ok    bool          // subscribed (ready closed without err)
}

// add registers fn for channel, starting the PubSub and its reader on the
// first call, and subscribes the channel for its first watcher.
func (w *watcher) add(client redis.UniversalClient, channel string, fn func(string)) (*watchChan, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.ended {
		return nil, 0, errClosed
	}
	if w.ps == nil {
		// No channel: go-redis connects on the first SUBSCRIBE.
		w.ps = client.Subscribe(context.Background())
		w.sem = make(chan struct{}, 1)
		w.chans = make(map[string]*watchChan)
		w.unsub = make(map[string]struct{})
		w.quit = make(chan struct{})
		w.done = make(chan struct{})
		go w.read(client, w.ps)
	}
	c := w.chans[channel]
	if c == nil {
		c = &watchChan{name: channel, fns: make(map[uint64]func(string)), ready: make(chan struct{})}
		w.chans[channel] = c
		w.subscribe(c)
	}
	w.nextID++
	c.fns[w.nextID] = fn
	return c, w.nextID, nil
}

// stopFunc returns the stop of fn id on c: it removes fn and, when c has no
// watcher left, leaves c to the reader to unsubscribe.
func (w *watcher) stopFunc(c *watchChan, id uint64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(c.fns, id)
			if len(c.fns) == 0 && w.chans[c.name] == c && !w.closed {
				if c.ok {
					w.unsub[c.name] = struct{}{}
				}
				// A pending c is unsubscribed once answered (read).
			}
		})
	}
}

// subscribe writes SUBSCRIBE for c in a goroutine of its own, so that no
// Watch waits beyond its context for the connection (held by the reader
// while it dials a paused server, say), and so that c is subscribed for
// the watchers that joined it even when the first one gives up. The reader
// resolves c when the server answers; a write that fails leaves it to
// go-redis, which subscribes every channel it was asked for again when it
// reconnects. w.mu is held.
func (w *watcher) subscribe(c *watchChan) {
	w.writers.Add(1)
	go func() {
		defer w.writers.Done()
		select {
		case w.sem <- struct{}{}:
		case <-w.quit:
			return
		}
		defer func() { <-w.sem }()
		w.mu.Lock()
		if w.closed || w.ended {
			w.mu.Unlock()
			return
		}
		w.pending = append(w.pending, c)
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), watchPingTimeout)
		_ = w.ps.Subscribe(ctx, c.name)
		cancel()
	}()
}

// errClosed fails the watches of a closed Node.
var errClosed = errors.New("node closed")

// resolve ends c's wait for the server with err (nil: subscribed). w.mu is
// held.
func (w *watcher) resolve(c *watchChan, err error) {
	if i := indexOf(w.pending, c); i >= 0 {
		w.pending = append(w.pending[:i], w.pending[i+1:]...)
	}
	select {
	case <-c.ready:
		return
	default:
	}
	c.err, c.ok = err, err == nil
	close(c.ready)
	if err != nil && w.chans[c.name] == c {
		delete(w.chans, c.name)
	}
	if (err != nil || len(c.fns) == 0) && !w.closed {
		w.unsub[c.name] = struct{}{}
	}
}

// subscribeDenied reports whether an error reply on the watch connection
// refuses a SUBSCRIBE: a NOPERM for the channels or the command, not for a
// health check's PING or an UNSUBSCRIBE.
func subscribeDenied(rerr redis.Error) bool {
	msg := rerr.Error()
	return denied(rerr) && !strings.Contains(msg, "'ping'") && !strings.Contains(msg, "'unsubscribe'")
}

func indexOf(cs []*watchChan, c *watchChan) int {
	for i, x := range cs {
		if x == c {
			return i
		}
	}
	return -1
}

// read is the Node's watch goroutine: it reads the PubSub until close (or
// until the client is closed: the owner of a client passed to New may close
// it without closing the Node), calls the fns of each notification,
// resolves the subscriptions, writes the UNSUBSCRIBEs that stop left, and
// checks the connection's health.
func (w *watcher) read(client redis.UniversalClient, ps *redis.PubSub) {
	defer close(w.done)
	var (
		pinged bool // a PING is out: the next read must get an answer in time
		fails  int  // connection errors in a row
		fns    []func(string)
	)
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		w.unsubscribe(ps)
		var msg any
		var err error
		if pinged {
			// No timeout of its own: a read that runs into the context's
			// deadline counts as a dead connection, which go-redis closes
			// (to dial it again on the next read).
			ctx, cancel := context.WithTimeout(context.Background(), watchPingTimeout)
			msg, err = ps.ReceiveTimeout(ctx, 0)
			cancel()
		} else {
			msg, err = ps.ReceiveTimeout(context.Background(), watchCheck)
		}
		reply, timeout := readError(err)
		switch {
		case err == nil:
		case reply != nil:
			// An error reply is an answer too. A refused SUBSCRIBE is the
			// oldest one pending (replies come in order).
			if subscribeDenied(reply) {
				w.mu.Lock()
				if len(w.pending) > 0 {
					w.resolve(w.pending[0], reply)
				}
				w.mu.Unlock()
			}
			pinged, fails = false, 0
			continue
		case !pinged && timeout:
			ctx, cancel := context.WithTimeout(context.Background(), watchPingTimeout)
			_ = ps.Ping(ctx)
			cancel()
			pinged = true
			continue
		case errors.Is(err, redis.ErrClosed) && clientClosed(client):
			w.end()
			return
		default:
			// A broken connection go-redis has dropped: the next read dials
			// again, after a pause when the last one failed too.
			pinged = false
			fails++
			if fails > 1 {
				t := time.NewTimer(min(time.Duration(fails-1)*100*time.Millisecond, watchRetry))
				select {
				case <-w.quit:
					t.Stop()
					return
				case <-t.C:
				}
			}
			continue
		}
		pinged = false
		if _, sub := msg.(*redis.Subscription); !sub {
			// A connection is healthy once it carries a message or a
			// PING's reply: one the server accepts, subscribes again and
			// then drops at once (a pub/sub output buffer limit) keeps
			// its pause between dials, and its watchers hear
			// wire.Resync at most once per dial.
			fails = 0
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			// A channel subscribed already is subscribed again after a
			// reconnect (go-redis does it): what was published between
			// is lost, so its watchers hear wire.Resync.
			fns = fns[:0]
			w.mu.Lock()
			if c := w.chans[m.Channel]; c != nil {
				if c.ok {
					fns = c.appendFns(fns)
				}
				w.resolve(c, nil)
			}
			w.mu.Unlock()
			fns = call(fns, wire.Resync)
		case *redis.Message:
			fns = fns[:0]
			w.mu.Lock()
			if c := w.chans[m.Channel]; c != nil && c.ok {
				fns = c.appendFns(fns)
			}
			w.mu.Unlock()
			fns = call(fns, m.Payload)
		}
	}
}

// appendFns appends c's watchers to fns. w.mu is held.
func (c *watchChan) appendFns(fns []func(string)) []func(string) {
	for _, fn := range c.fns {
		fns = append(fns, fn)
	}
	return fns
}

// call calls each of fns with msg, outside w.mu, and returns fns emptied
// for reuse.
func call(fns []func(string), msg string) []func(string) {
	for _, fn := range fns {
		fn(msg)
	}
	clear(fns)
	return fns[:0]
}

// readError classifies a failed read of the watch connection: reply is
// the server's error reply, timeout whether it is a network timeout; both
// zero for a nil err. A function of its own, so that the variables errors.As
// needs escape only when a read fails, not on every message.
func readError(err error) (redis.Error, bool) {
	if err == nil {
		return nil, false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return reply, false
	}
	var nerr net.Error
	return nil, errors.As(err, &nerr) && nerr.Timeout()
}

// clientClosed reports whether the Node's client was closed (a PubSub says
// "closed" also for a cluster node's client that left the cluster).
func clientClosed(client redis.UniversalClient) bool {
	ctx, cancel := context.WithTimeout(context.Background(), watchPingTimeout)
	defer cancel()
	return errors.Is(client.Ping(ctx).Err(), redis.ErrClosed)
}

// end fails the watches when the client was closed under the Node: Watch
// fails from then on, and Close still closes the PubSub.
func (w *watcher) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	w.failAll()
}

// failAll fails the watches still waiting for the server. w.mu is held.
func (w *watcher) failAll() {
	for _, c := range w.chans {
		select {
		case <-c.ready:
		default:
			c.err = errClosed
			close(c.ready)
		}
	}
	w.pending = nil
}

// unsubscribe writes UNSUBSCRIBE for the channels nobody watches any more.
func (w *watcher) unsubscribe(ps *redis.PubSub) {
	w.mu.Lock()
	empty := len(w.unsub) == 0
	w.mu.Unlock()
	if empty {
		return
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.quit:
		return
	}
	defer func() { <-w.sem }()
	var names []string
	w.mu.Lock()
	for name := range w.unsub {
		delete(w.unsub, name)
		c := w.chans[name]
		if c != nil && (len(c.fns) > 0 || !c.ok) {
			continue // watched again, or a new SUBSCRIBE is pending
		}
		delete(w.chans, name)
		names = append(names, name)
	}
	w.mu.Unlock()
	if len(names) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), watchPingTimeout)
		_ = ps.Unsubscribe(ctx, names...)
		cancel()
	}
}

// close ends the watches: it fails those still waiting for the server,
// closes the PubSub and waits for the reader.
func (w *watcher) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	ps := w.ps
	w.failAll()
	w.mu.Unlock()
	if ps == nil {
		return
	}
	close(w.quit)
	_ = ps.Close()
	w.writers.Wait()
	<-w.done
}
