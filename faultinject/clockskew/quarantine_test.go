package clockskew_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Issue 32, S2, on real masters under libfaketime: a master's clock steps
// forward right after its restart (chrony's makestep at boot, when the
// hardware clock lags). N=3, TTL 3s, WithRestartQuarantine(3s), no
// persistence; holder A has M1 and M2 (M3 held by another value); M1 is
// killed, restarted empty, and its clock stepped +60s; a client B that
// meets M1's new run first read uptime_in_seconds 60, counted M1's vote at
// once and took M1 and M3 while A held: two holders in 10 of 10 trials. The
// quarantine now bounds a first-met run's age by its main thread's CPU
// time, which no clock step moves. With knobs.WallUptime (the wall clock's
// uptime, as before) B gets the lock again: the test can fail.
func TestQuarantineThroughAClockStepAtBoot(t *testing.T) {
	kit := requireKit(t)
	for _, wall := range []bool{false, true} {
		t.Run(fmt.Sprint("wall uptime=", wall), func(t *testing.T) {
			if wall {
				knobs.WallUptime.Store(true)
				defer knobs.WallUptime.Store(false)
			}
			twoHolders, m1Quarantined := clockStepAtBoot(t, kit)
			if wall {
				if !twoHolders {
					t.Fatal("with the wall clock's uptime, B got no lock while A held: the scenario no longer shows the hole")
				}
				return
			}
			if twoHolders {
				t.Fatal("B got the lock while A held it: the stepped master's vote counted")
			}
			if !m1Quarantined {
				t.Fatal("B's refusals never named the restarted master as quarantined")
			}
		})
	}
}

// clockStepAtBoot runs the scenario once: twoHolders when B obtained the
// lock while A's lease was valid, m1Quarantined when one of B's refusals
// came from M1 as ErrNodeQuarantined.
func clockStepAtBoot(t *testing.T, kit *clockskew.Kit) (twoHolders, m1Quarantined bool) {
	ctx := context.Background()
	const ttl, quarantine = 3 * time.Second, 3 * time.Second
	m1 := startSkewed(t, kit)
	servers := []*redisproc.Server{m1.srv, redisproc.StartT(t, redisproc.Config{}), redisproc.StartT(t, redisproc.Config{})}
	var nodes []redlock.Node
	for _, s := range servers {
		n, err := redisnode.Dial(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	mutex := func() *redlock.Mutex {
		c, err := redlock.New(nodes, redlock.WithRestartQuarantine(quarantine), redlock.WithNodeTimeout(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		m, err := c.NewMutex("locks:boot", redlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := mutex(), mutex()
	m3 := newClient(t, servers[2].Addr())
	if err := m3.Set(ctx, "locks:boot", "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// A meets the young masters first and waits out their quarantine.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	held, err := a.Lock(lctx) // M1 and M2
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock(context.Background()) }()
	// M1's host reboots: the server starts at the lagging clock, which then
	// steps forward.
	if err := m1.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m1.clock.Restarted(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := m1.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := m1.clock.Set(60*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if err := m3.Del(ctx, "locks:boot").Err(); err != nil {
		t.Fatal(err)
	}
	// B, which never met M1's old run, tries while A's lease is valid.
	for held.Valid() {
		other, err := b.TryLock(ctx)
		if err == nil {
			twoHolders = held.Valid()
			_ = other.Unlock(ctx)
			return twoHolders, m1Quarantined
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("TryLock: %v", err)
		}
		if errors.Is(qe.Nodes[0].Err, redlock.ErrNodeQuarantined) {
			m1Quarantined = true
		}
		time.Sleep(20 * time.Millisecond) // a retry pace, not synchronisation
	}
	return false, m1Quarantined
}
