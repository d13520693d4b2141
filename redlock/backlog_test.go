package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// releaseLog is a Node whose releases fail (a plain error: unknown, so
// retried) while down is set, and that records every release it answers.
// onRelease, when set, runs after each answered release.
type releaseLog struct {
	mu        sync.Mutex
	down      bool
	got       []pendingRelease // key, value and guard of each answered release
	onRelease func(key, value string)
}

func (n *releaseLog) Addr() string { return "log" }

func (n *releaseLog) Info(context.Context) (ServerInfo, error) {
	return ServerInfo{RunID: "run-log", Uptime: time.Hour}, nil
}

func (n *releaseLog) Acquire(context.Context, string, string, time.Duration) (bool, error) {
	return true, nil
}

func (n *releaseLog) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return true, nil
}

func (n *releaseLog) Release(_ context.Context, key, value string, guard time.Duration) (bool, error) {
	n.mu.Lock()
	if n.down {
		n.mu.Unlock()
		return false, errors.New("log: no answer")
	}
	n.got = append(n.got, pendingRelease{key: key, value: value, guard: guard})
	hook := n.onRelease
	n.mu.Unlock()
	if hook != nil {
		hook(key, value)
	}
	return false, nil // "not held": an answer
}

func (n *releaseLog) setDown(down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = down
}

func (n *releaseLog) answered() []pendingRelease {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]pendingRelease(nil), n.got...)
}

// backlogEvents counts a client's backlog events by change and delta.
type backlogEvents struct {
	NopObserver
	mu sync.Mutex
	n  map[string]int
}

func (o *backlogEvents) NodeState(_ context.Context, e NodeStateEvent) {
	if e.RunID != "" { // a server run met
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[fmt.Sprintf("%s %+d", backlogChangeOf(e), e.Delta)]++
}

func (o *backlogEvents) counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.n {
		out[k] = v
	}
	return out
}

// A node that does not answer gets more than 1,024 releases queued: none is
// dropped (the old per-node cap refused every release past 1,024), each
// (key, value) is kept once (a second release of it is merged, keeping the
// longer guard), and once the node answers every one is sent, once, each
// key's values back to back, the keys in the order of their first release.
func TestBacklogKeepsEveryRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &releaseLog{down: true}
		obs := &backlogEvents{}
		c, err := New([]Node{node}, WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		info := &LockInfo{Name: "hot", Shape: shapeMutex}
		queue := func(key, value string, guard time.Duration) {
			c.queueRelease(context.Background(), 0, pendingRelease{key: key, value: value, guard: guard, kind: mutexKind{}, lock: info})
		}
		// 1,500 values of one key interleaved with 1,500 keys of one
		// value each; then each hot value again with a longer guard, and
		// every other key's value again with a shorter one.
		const n = 1500
		for i := range n {
			queue("hot", fmt.Sprintf("v%d", i), 0)
			queue(fmt.Sprintf("k%d", i), "v", time.Minute)
		}
		for i := range n {
			queue("hot", fmt.Sprintf("v%d", i), time.Minute)
			if i%2 == 0 {
				queue(fmt.Sprintf("k%d", i), "v", 0)
			}
		}
		synctest.Wait()
		if got := c.Stats().Backlog[0]; got != 2*n {
			t.Fatalf("backlog %d, want %d (every distinct key and value, once)", got, 2*n)
		}

		node.setDown(false)
		time.Sleep(2 * time.Second) // virtual: past the longest backoff
		synctest.Wait()
		if got := c.Stats().Backlog[0]; got != 0 {
			t.Fatalf("backlog %d after the node answered, want 0", got)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}

		var want []pendingRelease
		for i := range n {
			want = append(want, pendingRelease{key: "hot", value: fmt.Sprintf("v%d", i), guard: time.Minute})
		}
		for i := range n {
			want = append(want, pendingRelease{key: fmt.Sprintf("k%d", i), value: "v", guard: time.Minute})
		}
		got := node.answered()
		if len(got) != len(want) {
			t.Fatalf("%d releases answered, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("answered release %d: %s=%s guard %v, want %s=%s guard %v", i, got[i].key, got[i].value, got[i].guard, want[i].key, want[i].value, want[i].guard)
			}
		}
		wantEvents := map[string]int{"queued +1": 2 * n, "queued +0": n + n/2, "done -1": 2 * n}
		if ev := obs.counts(); fmt.Sprint(ev) != fmt.Sprint(wantEvents) {
			t.Fatalf("backlog events %v, want %v (none dropped)", ev, wantEvents)
		}
	})
}

// A release merged into one that is being sent, with a longer guard, is
// sent again with that guard: the answer to the first does not stand for
// it.
func TestBacklogResendsLongerGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &releaseLog{down: true}
		c, err := New([]Node{node})
		if err != nil {
			t.Fatal(err)
		}
		info := &LockInfo{Name: "k", Shape: shapeMutex}
		p := pendingRelease{key: "k", value: "v", kind: mutexKind{}, lock: info}
		c.queueRelease(context.Background(), 0, p)
		var once sync.Once
		node.onRelease = func(string, string) { // under the first answered send
			once.Do(func() {
				q := p
				q.guard = time.Minute
				c.queueRelease(context.Background(), 0, q)
			})
		}
		node.setDown(false)
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		got := node.answered()
		want := []pendingRelease{{key: "k", value: "v"}, {key: "k", value: "v", guard: time.Minute}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("answered %v, want %v", got, want)
		}
	})
}

// The drain sends one key's values back to back, but a key's turn covers
// only the values pending when it began: those queued during it wait
// behind the other keys.
func TestBacklogTurns(t *testing.T) {
	var b backlog
	add := func(key, value string) {
		if !b.add(pendingRelease{key: key, value: value}) {
			t.Fatalf("%s=%s merged", key, value)
		}
	}
	add("a", "1")
	add("a", "2")
	add("b", "1")
	var order []string
	next := func() {
		q := b.front()
		order = append(order, q.key+"="+q.value)
		b.remove(q)
	}
	next()        // a=1: a's turn covers a=1 and a=2
	add("a", "3") // queued during a's turn
	next()        // a=2: a's turn ends, a goes behind b
	next()        // b=1: b is done
	add("b", "2") // b again: behind a
	next()        // a=3
	next()        // b=2
	if b.len() != 0 || b.front() != nil {
		t.Fatalf("backlog not empty: %d", b.len())
	}
	if got, want := fmt.Sprint(order), "[a=1 a=2 b=1 a=3 b=2]"; got != want {
		t.Fatalf("drain order %s, want %s", got, want)
	}
}
