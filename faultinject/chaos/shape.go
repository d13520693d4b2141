package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/redlock"
)

// Shape is the kind of lock a scenario's clients take.
type Shape string

// The shapes of redlock.
const (
	// Mutex: Client.NewMutex (the default, "").
	Mutex Shape = ""
	// Fair: Client.NewMutex WithFairQueue: the waiters take the lock in
	// the masters' line order.
	Fair Shape = "fair"
	// RW: Client.NewRWMutex with writer preference; each acquisition is a
	// read lease with probability 3/4, else a write lease.
	RW Shape = "rw"
	// Semaphore: Client.NewSemaphore with Scenario.K places.
	Semaphore Shape = "semaphore"
	// Reentrant: Client.NewReentrant, one owner per client, which re-enters
	// once inside every critical section.
	Reentrant Shape = "reentrant"
	// Election: Client.NewElection; each acquisition is a leadership won
	// by Campaign (fenced and self-renewing, as every leadership is), ended
	// by its lease's Unlock (as Resign does).
	Election Shape = "election"
)

// locker is one client's lock of the scenario's shape.
type locker struct {
	mu    *redlock.Mutex // Mutex and Reentrant
	rw    *redlock.Mutex // RW: the reader (the writer is w)
	w     *redlock.Mutex
	sem   *redlock.Mutex
	el    *redlock.Election
	owner string // Reentrant; Election: the candidate's value
	k     int    // Semaphore
}

// newLocker builds client k's lock of shape sh on name.
func newLocker(rc *redlock.Client, sh Shape, k, places int, name string, opts []redlock.LockOption) (locker, error) {
	var l locker
	var err error
	switch sh {
	case Mutex:
		l.mu, err = rc.NewMutex(name, opts...)
	case Fair:
		l.mu, err = rc.NewMutex(name, append(opts, redlock.WithFairQueue())...)
	case RW:
		l.rw, l.w, err = rc.NewRWMutex(name, append(opts, redlock.WithWriterPreference())...)
	case Semaphore:
		l.k = places
		l.sem, err = rc.NewSemaphore(name, places, opts...)
	case Reentrant:
		l.owner = fmt.Sprintf("client%d", k)
		l.mu, err = rc.NewReentrant(name, l.owner, opts...)
	case Election:
		l.owner = fmt.Sprintf("client%d", k)
		l.el, err = rc.NewElection(name, opts...)
	default:
		err = fmt.Errorf("chaos: unknown shape %q", sh)
	}
	return l, err
}

// lock acquires (retrying until ctx ends) and returns the lease with the
// Acquired event's shape fields filled in.
func (l locker) lock(ctx context.Context) (*redlock.Lease, history.Event, error) {
	var ev history.Event
	var lease *redlock.Lease
	var err error
	switch {
	case l.rw != nil && rand.IntN(4) > 0:
		ev.Shared = true
		lease, err = l.rw.Lock(ctx)
	case l.rw != nil:
		lease, err = l.w.Lock(ctx)
	case l.sem != nil:
		ev.Limit = l.k
		lease, err = l.sem.Lock(ctx)
	case l.el != nil:
		var lead *redlock.Leadership
		if lead, err = l.el.Campaign(ctx, l.owner); err == nil {
			lease = lead.Lease()
		}
	default:
		ev.Owner = l.owner
		lease, err = l.mu.Lock(ctx)
	}
	return lease, ev, err
}

// writes says whether a lease acquired as ev writes the protected
// register: exclusive leases do; read and semaphore leases do not.
func writes(ev history.Event) bool { return !ev.Shared && ev.Limit == 0 }
