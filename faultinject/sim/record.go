package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The world records what its clients do and what it observes on the
// masters as a history (package history, on the bubble's clock as
// durations since t0); result judges it with history.Check.

// record adds e to the history.
func (w *world) record(e history.Event) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

// history returns a copy of the history so far. A delivery that outlived
// the run's wait may still record (an Overtaken event) while the run is
// judged: the history is read under its lock.
func (w *world) history() []history.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// refused records that master l.master refused a release of value (a
// key's value or a hold's id) without applying it.
func (w *world) refused(l *link, value string) {
	w.record(history.Event{Client: l.client, Kind: history.ReleaseRefused, At: w.at(time.Now()), Token: value, Node: l.master})
}

// at is t on the history's clock.
func (w *world) at(t time.Time) time.Duration { return t.Sub(w.t0) }

// acquired records lease, just granted to client c on name ni, as h and in
// the history.
func (w *world) acquired(c, ni int, h *hold, lease *redlock.Lease) {
	p := w.plan
	sh := p.shape(ni)
	h.client, h.name, h.token, h.start = c, p.Names[ni], lease.Token(), time.Now()
	h.fence, _ = lease.Fence()
	if sh.Kind == ReentrantLock {
		h.owner = ownerName(p.Owners[c])
	}
	e := history.Event{Client: c, Kind: history.Acquired, At: w.at(h.start), Lock: h.name, Token: h.token,
		Until: w.at(lease.Until()), Fence: h.fence, Owner: h.owner, Holds: lease.Holds(), Shared: sh.Kind == RWLock && !h.write, Delay: p.Delay}
	if sh.Kind == SemaphoreLock {
		e.Limit = sh.K
	}
	w.mu.Lock()
	h.idx = len(w.holds)
	w.holds = append(w.holds, h)
	w.events = append(w.events, e)
	w.mu.Unlock()
}

// stopped records that h's holder stopped using lease now: its interval
// ends now or at its validity's end, whatever the release then takes.
func (w *world) stopped(h *hold, lease *redlock.Lease) {
	now, until := time.Now(), lease.Until()
	h.end = until
	if now.Before(h.end) {
		h.end = now
	}
	w.record(history.Event{Client: h.client, Kind: history.Unlock, At: w.at(now), Lock: h.name, Token: lease.Token(), Until: w.at(until)})
}

// write is the protected work: with fencing a write to the name's
// FencedStore with the lease's token; without, a write that must land
// while the lease is valid. lease is nil for a write after a pause, made
// without checking; until is the lease's validity deadline then.
func (w *world) write(h *hold, ni int, lease *redlock.Lease, until time.Time) {
	if lease != nil && !lease.Valid() {
		return
	}
	e := history.Event{Client: h.client, Kind: history.WriteAccepted, At: w.at(time.Now()), Lock: h.name, Token: h.token, Until: w.at(until)}
	if !w.plan.Fencing {
		w.record(e)
		return
	}
	e.Fence = h.fence
	// The store's decision and its event under one lock: the history
	// orders the writes as the store took them.
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.stores[ni].Write(h.fence, fmt.Sprint(h.idx)); err != nil {
		e.Kind = history.WriteRejected
		w.hist = append(w.hist, fmt.Sprintf("%12v c%d fenced write %d refused", time.Since(w.t0), h.client, h.fence))
	}
	w.events = append(w.events, e)
}

// holdsToken reports whether value (a lock key's, or a hold's ID) is one
// the acquisition of token stored (wire.ValueToken).
func holdsToken(value, token string) bool {
	t, ok := wire.ValueToken(value)
	return ok && t == token
}

// covered records how many masters hold lease now (its key, or a shape's
// hold), against the quorum that must while it is valid (validity never
// exceeds the real remaining time on a quorum); a semaphore's quorum is
// its larger one; with a Change, the quorum of each set of the lease's
// configuration, as its least covered set. Servers, not addresses, are counted: a server listed
// twice holds one key, and a lease granted by its two addresses is on one
// server.
func (w *world) covered(h *hold, sh Shape, lease *redlock.Lease) {
	on := func(m *memnode.Node) bool {
		v, ok := m.Keys()[h.name]
		if ok && sh.Kind != MutexLock {
			ok = slices.ContainsFunc(strings.Split(v, " "), func(mem string) bool {
				_, id, _ := wire.ParseMember(mem)
				return holdsToken(id, lease.Token())
			})
		} else if ok {
			ok = holdsToken(v, lease.Token())
		}
		return ok
	}
	n, quorum := 0, sh.quorum(w.plan.addrs())
	for _, m := range w.masters {
		if on(m) {
			n++
		}
	}
	if w.change != nil {
		// The lease's configuration: the set with the least margin (a
		// lease must be on a quorum of each set, joint mode's two).
		n, quorum = len(w.masters), 0
		for _, set := range w.change.cfgs[h.cfg].Sets() {
			k := 0
			for _, a := range set.Masters {
				if on(w.masters[masterIndex(a)]) {
					k++
				}
			}
			if k-set.Quorum < n-quorum {
				n, quorum = k, set.Quorum
			}
		}
	}
	w.record(history.Event{Client: h.client, Kind: history.Covered, At: w.at(time.Now()), Lock: h.name, Token: lease.Token(),
		Until: w.at(lease.Until()), Copies: n, Quorum: quorum})
}

// leftovers records, as events of kind k (history.Leftover: after every
// client closed; history.Outlived: one TTL later), every key and shape
// hold on the masters. A writer's waiting mark is no leftover (it lives
// waitTTL, within the one-TTL wait), but it must be gone one TTL later.
func (w *world) leftovers(k history.Kind) {
	at := w.at(time.Now())
	for mi, m := range w.masters {
		keys := m.Keys()
		names := make([]string, 0, len(keys))
		for name := range keys {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			v := keys[name]
			_, kind := wire.Parse(name)
			_, _, holds := wire.ParseMember(v) // v is a shared lock's members, not a mutex's value
			switch {
			case k == history.Leftover && w.plan.Shapes != nil && kind == wire.Waiting:
			case w.plan.Shapes == nil || !holds:
				w.record(history.Event{Kind: k, At: at, Lock: name, Node: mi, Token: v, Note: "key " + name})
			default:
				for _, mem := range strings.Split(v, " ") {
					_, id, _ := wire.ParseMember(mem)
					w.record(history.Event{Kind: k, At: at, Lock: name, Node: mi, Token: id, Note: fmt.Sprintf("hold %q of %s", mem, name)})
				}
			}
		}
	}
}

// sentBy is a key value's client and the time it first sent it.
type sentBy struct {
	client int
	at     time.Duration
}

// sending notes that client c sends value for key, the script's lock (a
// script's run only).
func (w *world) sending(c int, key, value string) {
	if key != scriptName {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.sent[value]; !ok && w.sent != nil {
		w.sent[value] = sentBy{c, w.at(time.Now())}
	}
}

// checkpoint records, as history.Held events, the value each master holds
// now as the script's lock key, with the client that sent it (a value no
// client sent, none).
func (w *world) checkpoint() {
	at := w.at(time.Now())
	for mi, m := range w.masters {
		v, ok := m.Keys()[scriptName]
		if !ok {
			continue
		}
		w.mu.Lock()
		by, ok := w.sent[v]
		w.mu.Unlock()
		if !ok {
			continue
		}
		w.record(history.Event{Client: by.client, Kind: history.Held, At: at, Lock: scriptName, Token: v, Node: mi, Sent: by.at})
		w.log("checkpoint: m%d holds c%d's value %s (sent at %v)", mi, by.client, v, by.at)
	}
}

// restoredLines records, once master mi has restarted from its last fsync
// (taken at synced), every waiter's entry back in a line there although
// its removal had applied after that fsync (the AOF tail lost it): a
// history.Restored for each value its acquires before the fsync carried
// (its record, or a key a release had handed it, came back with one), so
// that a key left at that value is excused (history.NoOrphans).
func (w *world) restoredLines(mi int, synced time.Time) {
	m := w.masters[mi]
	at := w.at(time.Now())
	for _, ls := range w.links {
		for _, l := range ls {
			if l.master != mi {
				continue
			}
			for _, e := range l.removedSince(synced) {
				if !slices.Contains(m.Line(e.key), e.id) {
					continue
				}
				for _, v := range e.valuesBy(synced) {
					w.record(history.Event{Client: l.client, Kind: history.Restored, At: at, Lock: e.key, Token: v, Node: mi,
						Note: fmt.Sprintf("waiter %s back in the line, its removal applied at %v", e.id, w.at(e.removed))})
				}
			}
		}
	}
}
