package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SemaphoreBound checks that at no instant are more than K leases of a
// semaphore believed valid.
var SemaphoreBound = Invariant{
	Name:  "semaphore-bound",
	About: "at no instant are more than K leases of a semaphore believed valid ([Start, End), a hand-over at one instant is no excess)",
	Class: Exclusion,
	judge: judgeSemaphore,
}

// judgeSemaphore sweeps each lock's semaphore leases (Limit > 0) in time
// order and reports the first moment of each excess, with the leases
// valid then.
func judgeSemaphore(v *view, _ *Findings) []Violation {
	type edge struct {
		at    time.Duration
		delta int
		iv    *Interval
	}
	var out []Violation
	for _, l := range v.locks {
		var edges []edge
		for _, iv := range l.leases {
			if iv.Limit > 0 && iv.End > iv.Start {
				edges = append(edges, edge{iv.Start, +1, iv}, edge{iv.End, -1, iv})
			}
		}
		// At equal times an end comes before a start: a hand-over is no
		// excess.
		slices.SortStableFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
		var valid []*Interval
		over := false
		for _, e := range edges {
			if e.delta < 0 {
				valid = slices.DeleteFunc(valid, func(iv *Interval) bool { return iv == e.iv })
			} else {
				valid = append(valid, e.iv)
			}
			n, k := len(valid), e.iv.Limit
			if n > k && !over {
				held := make([]string, len(valid))
				for i, iv := range valid {
					held[i] = fmt.Sprintf("c%d [%v, %v]", iv.Client, iv.Start, iv.End)
				}
				out = append(out, Violation{Lock: l.name, At: e.at, Client: e.iv.Client, Token: e.iv.Token,
					What: fmt.Sprintf("%s%d valid leases of a semaphore with K=%d at %v: %s", on(l.name), n, k, e.at, strings.Join(held, ", "))})
			}
			over = n > k
		}
	}
	return out
}
