package history

import "fmt"

// HoldsBound checks that Lease.Holds counts the lease's group on the masters
// that granted it, which each admit at most the shape's limit
// (docs/shapes.md).
var HoldsBound = Invariant{
	Name:  "holds-bound",
	About: "Lease.Holds reports at least 1, at most K for a semaphore place, exactly 1 for an exclusive lease",
	Class: Contract,
	judge: judgeHolds,
}

// DoReleases checks that Mutex.Do releases its lease on every exit, a panic
// of its function included.
var DoReleases = Invariant{
	Name:  "do-releases",
	About: "a lease whose Mutex.Do has returned is not valid (held and renewed by nobody's code otherwise)",
	Class: Contract,
	judge: judgeDoReleases,
}

func judgeHolds(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, e := range v.of(Acquired) {
		n := e.Holds
		var what string
		switch {
		case n < 1:
			what = fmt.Sprintf("c%d's lease on %s reports %d holds", e.Client, e.Lock, n)
		case e.Limit > 0 && n > e.Limit:
			what = fmt.Sprintf("c%d's place on %s reports %d holders, K=%d", e.Client, e.Lock, n, e.Limit)
		case e.Limit == 0 && !e.Shared && e.Owner == "" && n != 1:
			what = fmt.Sprintf("c%d's exclusive lease on %s reports %d holds", e.Client, e.Lock, n)
		default:
			continue
		}
		out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token, What: what})
	}
	return out
}

func judgeDoReleases(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, e := range v.of(DoReturned) {
		if e.Valid {
			out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token,
				What: fmt.Sprintf("c%d's lease %.8s on %s is still valid after its Do returned: held and renewed by nobody (until %v)", e.Client, e.Token, e.Lock, e.Until)})
		}
	}
	return out
}
