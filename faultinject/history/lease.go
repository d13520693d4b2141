package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Interval is the time one lease was believed valid by its client: from
// Start (Acquired) to End = min(the start of Unlock, Until).
type Interval struct {
	Client int
	Lock   string
	Token  string
	// Start and End bound the belief; Until is the latest validity
	// deadline any of the lease's events recorded (renewals move it).
	Start, End time.Duration
	Until      time.Duration
	// Shared, Limit and Owner come from the Acquired event: a read lease,
	// a semaphore's K, a reentrant owner.
	Shared bool
	Limit  int
	Owner  string
	// Fence is the lease's fencing token (0 without fencing).
	Fence int64
	// Paused: the holder stalled before a write (a Paused event).
	Paused bool
	// Delay is the lock delay (from the Acquired event; 0 without).
	Delay time.Duration
	// Unlocked: the holder called Unlock, first at UnlockAt.
	Unlocked bool
	UnlockAt time.Duration
}

// granted says whether the lease was valid when its client got it (a
// lease whose validity was over by then was never believed valid).
func (iv *Interval) granted() bool { return iv.Until > iv.Start }

// conflicts says whether a and b may not overlap: not two read leases, not
// two leases of one reentrant owner, and semaphore leases are counted
// instead (SemaphoreBound).
func (iv *Interval) conflicts(b *Interval) bool {
	switch {
	case iv.Limit > 0 || b.Limit > 0:
		return false
	case iv.Shared && b.Shared:
		return false
	case iv.Owner != "" && iv.Owner == b.Owner:
		return false
	}
	return true
}

// label says what kind of lease iv is, for a report.
func (iv *Interval) label() string {
	switch {
	case iv.Shared:
		return " (read)"
	case iv.Limit > 0:
		return " (place)"
	case iv.Owner != "":
		return " (owner " + iv.Owner + ")"
	}
	return ""
}

func (iv *Interval) String() string {
	return fmt.Sprintf("c%d's lease %.8s%s [%v, %v]", iv.Client, iv.Token, iv.label(), iv.Start, iv.End)
}

// lockView is one lock's part of a history.
type lockView struct {
	name string
	// leases in order of Start (stable: recording order at equal starts).
	leases []*Interval
	// writes, accepted or not, in recording order.
	writes []Event
	// fenced: a write carried a fencing token; fencedLeases: a lease did.
	fenced, fencedLeases bool
}

// view is a history indexed once for every invariant.
type view struct {
	events []Event
	leases map[string]*Interval // by token
	locks  []*lockView          // by name
}

// index builds the view of events, which need not be in time order.
func index(events []Event) *view {
	v := &view{events: events, leases: map[string]*Interval{}}
	byName := map[string]*lockView{}
	lock := func(name string) *lockView {
		l := byName[name]
		if l == nil {
			l = &lockView{name: name}
			byName[name] = l
			v.locks = append(v.locks, l)
		}
		return l
	}
	for _, e := range events {
		if e.Kind != Acquired {
			continue
		}
		iv := &Interval{Client: e.Client, Lock: e.Lock, Token: e.Token, Start: e.At, End: e.Until, Until: e.Until,
			Shared: e.Shared, Limit: e.Limit, Owner: e.Owner, Fence: e.Fence, Delay: e.Delay}
		v.leases[e.Token] = iv
		l := lock(e.Lock)
		l.leases = append(l.leases, iv)
		l.fencedLeases = l.fencedLeases || e.Fence > 0
	}
	for _, e := range events {
		iv := v.leases[e.Token]
		if iv != nil && e.Until > iv.Until {
			iv.Until, iv.End = e.Until, e.Until
		}
		switch e.Kind {
		case WriteAccepted, WriteRejected:
			l := lock(e.Lock)
			if iv != nil {
				l = lock(iv.Lock)
			}
			l.writes = append(l.writes, e)
			l.fenced = l.fenced || e.Fence > 0
		case Paused:
			if iv != nil {
				iv.Paused = true
			}
		}
	}
	for _, e := range events {
		iv := v.leases[e.Token]
		if iv == nil || e.Kind != Unlock {
			continue
		}
		if !iv.Unlocked || e.At < iv.UnlockAt {
			iv.Unlocked, iv.UnlockAt = true, e.At
		}
		if e.At < iv.End {
			iv.End = max(e.At, iv.Start)
		}
	}
	for _, l := range v.locks {
		slices.SortStableFunc(l.leases, func(a, b *Interval) int { return cmp.Compare(a.Start, b.Start) })
	}
	slices.SortFunc(v.locks, func(a, b *lockView) int { return strings.Compare(a.name, b.name) })
	return v
}

// of returns the events of kind k, in recording order.
func (v *view) of(k Kind) []Event {
	var out []Event
	for _, e := range v.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// fenced reports whether lock name's writes carried fencing tokens.
func (v *view) fenced(name string) bool {
	for _, l := range v.locks {
		if l.name == name {
			return l.fenced
		}
	}
	return false
}

// on prefixes a report with the lock's name, when the history has one.
func on(lock string) string {
	if lock == "" {
		return ""
	}
	return lock + ": "
}
