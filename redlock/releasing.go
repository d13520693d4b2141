package redlock

import "sync"

// Unlock returns once a quorum of nodes confirmed the release; the releases
// still running on the other nodes finish in the background. The client
// keeps its promise to itself all the same: its next acquire of the same
// lock waits, on each node, for this Unlock's release still running there
// (op.before), so that it never meets the released lease's key on a node
// that answers. releasing holds those rounds, by lock name, until their last
// call finishes.
type releasing struct {
	mu sync.Mutex
	m  map[string]*round
}

// keep records r, the release round of Unlock of the lock name, when some of
// its calls are still running. The last of them to finish forgets it
// (Client.finish): it decrements r.running before it takes rs.mu, so either
// keep sees no call running, or forget runs after keep.
func (rs *releasing) keep(name string, r *round) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.running.Load() == 0 {
		return // every call finished: nothing to wait for
	}
	if rs.m == nil {
		rs.m = map[string]*round{}
	}
	rs.m[name] = r
}

// forget drops r, whose calls have all finished, unless a later Unlock
// replaced it.
func (rs *releasing) forget(name string, r *round) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m[name] == r {
		delete(rs.m, name)
	}
}

// pending returns the calls of the last Unlock's release of the lock name
// that an acquire must wait for, or nil when they have all finished.
func (rs *releasing) pending(name string) []*call {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.m[name]; r != nil {
		return r.calls
	}
	return nil
}
