package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestServerCheckAtFirstContact: a client judges each server's settings
// when it first meets it, as quorumlock doctor does, and reports the
// findings through its Observer and logger: on real servers configured
// badly on purpose (an eviction policy that evicts lock keys, no AOF, a
// replica) next to a sound one (AOF with appendfsync always). With the
// restart quarantine the findings it covers are left out, except on a node
// it exempts as durable. A restart is a new run: checked again.
func TestServerCheckAtFirstContact(t *testing.T) {
	evicting := redisproc.StartT(t, redisproc.Config{Args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}})
	plain := redisproc.StartT(t, redisproc.Config{})
	sound := redisproc.StartT(t, redisproc.Config{AppendOnly: true})
	_, port, _ := net.SplitHostPort(sound.Addr())
	replica := redisproc.StartT(t, redisproc.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	addrs := []string{evicting.Addr(), plain.Addr(), sound.Addr(), replica.Addr()}
	admin := redis.NewClient(&redis.Options{Addr: sound.Addr()})
	defer admin.Close()
	waitFor(t, "the replica to connect", func() bool {
		info, err := admin.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	})

	// checks runs one client over the four servers, takes a lock, and
	// returns each node's findings as "level check" and the log.
	checks := func(t *testing.T, opts ...redlock.ClientOption) (map[string][]string, string) {
		t.Helper()
		nodes := make([]redlock.Node, len(addrs))
		for i, a := range addrs {
			n, err := redisnode.Dial(a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Close() })
			nodes[i] = n
		}
		rec := &recorder{}
		var log bytes.Buffer
		opts = append(opts, redlock.WithObserver(rec), redlock.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		c, err := redlock.New(nodes, opts...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.NewMutex("servercheck")
		if err != nil {
			t.Fatal(err)
		}
		// The attempt meets every server; whether it gets the lock does
		// not matter (the replica refuses writes; young servers are
		// quarantined).
		if l, err := m.TryLock(context.Background()); err == nil {
			_ = l.Unlock(context.Background())
		}
		// The replica refuses the attempt's release too: Close abandons it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil && !errors.Is(err, redlock.ErrNotReleased) {
			t.Errorf("Close: %v", err)
		}
		seen := func() int {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			runs, _ := rec.runs()
			return len(runs)
		}
		waitFor(t, "a check of every server", func() bool { return seen() >= len(addrs) })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		got := map[string][]string{}
		runs, _ := rec.runs()
		for _, e := range runs {
			if _, dup := got[e.Node]; dup || e.Node != addrs[e.Index] || e.RunID == "" {
				t.Errorf("check event %+v: a second one for the run, or a wrong node", e)
			}
			got[e.Node] = []string{}
			for _, f := range e.Findings {
				got[e.Node] = append(got[e.Node], f.Level+" "+f.Check)
				if !strings.Contains(log.String(), "redlock: server check: "+f.Text) {
					t.Errorf("the log lacks the finding %q:\n%s", f.Text, log.String())
				}
			}
			slices.Sort(got[e.Node])
		}
		return got, log.String()
	}

	got, _ := checks(t)
	want := map[string][]string{
		evicting.Addr(): {"bad maxmemory-policy", "warn persistence"},
		plain.Addr():    {"warn persistence"},
		sound.Addr():    {"warn role"}, // a master with a replica a failover could promote
		replica.Addr():  {"bad role", "warn persistence"},
	}
	for a, w := range want {
		if !slices.Equal(got[a], w) {
			t.Errorf("without the quarantine, %s: findings %q, want %q", a, got[a], w)
		}
	}

	got, _ = checks(t, redlock.WithRestartQuarantine(0, plain.Addr()))
	want = map[string][]string{
		evicting.Addr(): {"bad maxmemory-policy"},
		plain.Addr():    {"warn persistence"}, // durable: the quarantine does not cover it
		sound.Addr():    {},
		replica.Addr():  {"bad role"},
	}
	for a, w := range want {
		if !slices.Equal(got[a], w) {
			t.Errorf("with the quarantine, %s: findings %q, want %q", a, got[a], w)
		}
	}
}
