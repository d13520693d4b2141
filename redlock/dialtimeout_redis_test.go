package redlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// On a real server: a paused master whose accept queue is
// full times out new dials while it holds, unread, an acquire sent on a
// connection it had accepted. A timed-out dial is not "not sent": the
// rollback's release must stay queued until the master resumes, so no lock
// key is left. With knobs.DialTimeoutNotSent (the old rule) the release is
// dropped and the straggler acquire leaves an orphan key when the master
// resumes.
func TestDialTimeoutIsNotNotSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		knob   bool
		orphan bool
	}{
		{"timed-out dial is unknown", false, false},
		{"knob DialTimeoutNotSent: orphan", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			knobs.DialTimeoutNotSent.Store(tc.knob)
			t.Cleanup(func() { knobs.DialTimeoutNotSent.Store(false) })
			assert.Equal(t, tc.orphan, straggleThroughFullAcceptQueue(t))
		})
	}
}

// dialLog records the local addresses of a client's successful dials and
// counts its failed ones.
type dialLog struct {
	mu       sync.Mutex
	locals   []string
	timeouts int
}

func (d *dialLog) dialer(addr string) func(ctx context.Context, network, _ string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, addr)
		d.mu.Lock()
		defer d.mu.Unlock()
		var ne net.Error
		switch {
		case err == nil:
			d.locals = append(d.locals, c.LocalAddr().String())
		case errors.As(err, &ne) && ne.Timeout():
			d.timeouts++
		}
		return c, err
	}
}

func (d *dialLog) state() (locals []string, timeouts int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.locals...), d.timeouts
}

// straggleThroughFullAcceptQueue runs the scenario and reports whether a
// lock key was left on the master after everything settled.
func straggleThroughFullAcceptQueue(t *testing.T) (orphan bool) {
	// A backlog of 1: Linux queues backlog+1 connections (capped by
	// net.core.somaxconn).
	srv := redisproc.StartT(t, redisproc.Config{Args: []string{"--tcp-backlog", "1"}})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })

	// The lock-safe settings of redisnode.Dial, with one pooled connection
	// (the straggler's) and a dial timeout below the release timeout, so a
	// release's dial fails with its own timeout, not the call's deadline.
	dials := &dialLog{}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: dials.dialer(srv.Addr()),
		ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, DialTimeout: 50 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, PoolTimeout: 500 * time.Millisecond,
		PoolSize: 1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { _ = rc.Close() })
	node, err := redisnode.New(rc)
	require.NoError(t, err)
	c := newClient(t, []redlock.Node{node}, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithReleaseTimeout(500*time.Millisecond))
	m := newMutex(t, c, redlock.WithTTL(time.Minute))
	warmUp(t, m) // identifies the server and loads the scripts on the one connection
	locals, _ := dials.state()
	require.Len(t, locals, 1, "one pooled connection")
	straggler := locals[0]

	require.NoError(t, srv.Pause())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	// Fill the accept queue: connect until a dial times out.
	var fillers []net.Conn
	t.Cleanup(func() {
		for _, f := range fillers {
			_ = f.Close()
		}
	})
	for {
		f, err := net.DialTimeout("tcp", srv.Addr(), 100*time.Millisecond)
		if err != nil {
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "a full accept queue times dials out: %v", err)
			break
		}
		fillers = append(fillers, f)
		require.Less(t, len(fillers), 5000, "the accept queue never filled")
	}
	t.Logf("accept queue full after %d connections", len(fillers))

	// The straggler: the acquire is written on the accepted connection and
	// waits, unread, in the paused server. The lock fails; its rollback's
	// release finds no connection and its dial times out.
	_, err = m.TryLock(context.Background())
	require.Error(t, err)
	t.Logf("TryLock: %v", err)
	waitFor(t, "the rollback's release to have dialed and timed out, and finished", func() bool {
		_, timeouts := dials.state()
		return timeouts > 0 && c.Stats().InFlight[0] == 0
	})
	t.Logf("release backlog while paused: %d", c.Stats().Backlog[0])

	require.NoError(t, srv.Resume())
	resumed = true
	for _, f := range fillers {
		_ = f.Close()
	}
	fillers = nil
	waitFor(t, "the release backlog to drain", func() bool { return c.Stats().Backlog[0] == 0 })
	ctx := context.Background()
	// go-redis probes a pool whose dials failed from a goroutine that ends
	// only when a dial succeeds; let it.
	waitFor(t, "the client to dial again", func() bool { return rc.Ping(ctx).Err() == nil })
	// The straggler's connection (closed by the client at its timeout) is
	// freed by the server once it has run the queued acquire.
	waitFor(t, "the server to run the straggler's queued acquire", func() bool {
		list, err := admin.ClientList(ctx).Result()
		return err == nil && !strings.Contains(list, "addr="+straggler+" ")
	})
	keys, err := admin.Keys(ctx, lockName).Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		pttl, _ := admin.PTTL(ctx, lockName).Result()
		t.Logf("orphan key %q left with %v to live", lockName, pttl)
	}
	return len(keys) > 0
}

// waitFor polls cond every 10ms until it holds; it fails the test after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-limit.C:
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

// waitOlder makes every master at least d old as a client reads its age
// (Info's Uptime: the main thread's CPU time, which an idle server gains
// slowly), so that the restart quarantine counts it as old: it keeps each
// server's main thread busy (a script that spins on TIME) until its node
// reports the age.
func waitOlder(t *testing.T, ms *masters, nodes []redlock.Node, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() { // the servers spin side by side
			defer wg.Done()
			for range 200 { // bounded: 200 spins of up to 500ms
				info, err := nd.Info(ctx)
				if err == nil && info.Uptime >= d {
					return
				}
				left := d
				if err == nil {
					left -= info.Uptime
				}
				_ = ms.raw[i].Eval(ctx, spin, nil, min(left, 500*time.Millisecond).Microseconds()+1000).Err()
			}
			t.Errorf("server %d never reported %v of age", i, d)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// spin keeps the server's main thread busy for ARGV[1] microseconds.
const spin = `local t = redis.call('TIME')
local from = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - from >= tonumber(ARGV[1])
return 1`
