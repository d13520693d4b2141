package history

import (
	"fmt"
	"sort"
)

// FreshWrites checks that without fencing, a write is accepted only while
// its lease is valid and before any conflicting lease of the lock began.
var FreshWrites = Invariant{
	Name:  "fresh-writes",
	About: "without fencing, no write is accepted after its lease's validity ended or after a conflicting lease of the lock began",
	Class: Write,
	judge: judgeFreshWrites,
}

// LeasedWrites checks that every accepted write comes from a lease.
var LeasedWrites = Invariant{
	Name:  "leased-writes",
	About: "no write is accepted from a token that never held the lock",
	Class: Write,
	judge: judgeLeasedWrites,
}

// judgeFreshWrites judges each accepted write of an unfenced lock by time:
// stale once its lease's validity ended (Lease.Valid is false from Until
// on) or once a conflicting lease of another token began.
func judgeFreshWrites(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, l := range v.locks {
		if l.fenced {
			continue
		}
		for _, e := range l.writes {
			iv := v.leases[e.Token]
			if e.Kind != WriteAccepted || iv == nil {
				continue
			}
			stale := func(reason string) {
				out = append(out, Violation{Lock: l.name, At: e.At, Client: e.Client, Token: e.Token, Paused: iv.Paused,
					What: fmt.Sprintf("%sclient %d's write at %v (lease %.8s) was accepted %s", on(l.name), e.Client, e.At, e.Token, reason)})
			}
			if e.At >= iv.Until {
				stale(fmt.Sprintf("%v after its lease's validity ended at %v", e.At-iv.Until, iv.Until))
				continue
			}
			// The first conflicting lease of another token that began
			// after this lease and before the write.
			k := sort.Search(len(l.leases), func(k int) bool { return l.leases[k].Start > iv.Start })
			for ; k < len(l.leases) && l.leases[k].Start < e.At; k++ {
				if o := l.leases[k]; o.Token != iv.Token && iv.conflicts(o) {
					stale(fmt.Sprintf("after client %d's later lease %.8s began at %v", o.Client, o.Token, o.Start))
					break
				}
			}
		}
	}
	return out
}

func judgeLeasedWrites(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, e := range v.of(WriteAccepted) {
		if v.leases[e.Token] == nil {
			out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token,
				What: fmt.Sprintf("%sclient %d's write at %v (lease %.8s) was accepted from a token that never held the lock", on(e.Lock), e.Client, e.At, e.Token)})
		}
	}
	return out
}
