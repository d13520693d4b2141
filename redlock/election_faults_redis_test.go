package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/redlock"
)

// Issue 32, item 2, as the testers saw it: three candidates campaign on
// three masters (TTL 1s, restart quarantine on, from start-up, while the
// masters are younger than it) while two masters are paused for 1.5s three
// times; an observer watches. Every leader it reports must be one that was
// elected, with that leader's own term. Before the fix, failed campaigns'
// keys (late acquires run by the resumed masters, votes of quarantined
// masters) were reported as leaders with another leader's term.
func TestElectionObserveReportsOnlyElectedLeadersUnderPauses(t *testing.T) {
	ms := startMasters(t, 3)
	const ttl = time.Second
	opts := []redlock.ClientOption{redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithReleaseTimeout(100 * time.Millisecond), redlock.WithRestartQuarantine(0)}
	var mu sync.Mutex
	elected := map[redlock.Leader]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range 3 {
		e := newElection(t, realClient(t, ms.nodes, opts...), redlock.WithTTL(ttl), redlock.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := fmt.Sprint("candidate-", k)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				l, err := e.Campaign(ctx, value)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				elected[redlock.Leader{Value: value, Term: l.Term()}] = true
				mu.Unlock()
				hold := time.NewTimer(ttl / 2)
				select {
				case <-l.Context().Done():
				case <-hold.C:
				case <-stop:
				}
				hold.Stop()
				_ = l.Resign(context.Background())
			}
		}()
	}
	watcher := newElection(t, realClient(t, ms.nodes, opts...), redlock.WithTTL(ttl))
	octx, stopObserving := context.WithCancel(context.Background())
	var seen []redlock.Leader
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for l := range watcher.Observe(octx) {
			seen = append(seen, l)
		}
	}()
	for range 3 {
		time.Sleep(ttl) // let leaders be elected (and masters age)
		r0, r1 := ms.pause(t, 0), ms.pause(t, 1)
		time.Sleep(3 * ttl / 2)
		r0()
		r1()
	}
	time.Sleep(2 * ttl)
	close(stop)
	wg.Wait()
	stopObserving()
	<-observed

	mu.Lock()
	defer mu.Unlock()
	reported := 0
	for _, l := range seen {
		if l.Term == 0 {
			continue
		}
		reported++
		assert.True(t, elected[l], "Observe reported %+v, which was not elected with that term", l)
	}
	t.Logf("%d leaders elected, %d reports of a leader", len(elected), reported)
	assert.NotZero(t, reported, "leaders were reported")
}
