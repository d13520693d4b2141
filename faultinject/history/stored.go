package history

import (
	"cmp"
	"fmt"
	"slices"
)

// StoredWriteOrder checks that what a fenced resource kept, read back from
// it in its own order (Stored events, by Seq), never has an older lease's
// write after a newer lease's, and holds only writes of leases. It judges
// the resource's own record, where FencedWriteOrder judges the harness's
// timestamps of the resource's decisions: a resource that accepted a write
// the harness saw refused, or committed writes in another order than it
// decided them, breaks this one.
var StoredWriteOrder = Invariant{
	Name:  "stored-write-order",
	About: "a fenced resource's own record of the writes it kept, in its commit order, never has an older lease's write after a newer lease's, nor a write of a token that never held the lock",
	Class: Fencing,
	judge: judgeStoredWriteOrder,
}

func judgeStoredWriteOrder(v *view, _ *Findings) []Violation {
	byLock := map[string][]Event{}
	var names []string
	for _, e := range v.of(Stored) {
		name := e.Lock
		if iv := v.leases[e.Token]; iv != nil {
			name = iv.Lock
		}
		if _, ok := byLock[name]; !ok {
			names = append(names, name)
		}
		byLock[name] = append(byLock[name], e)
	}
	slices.Sort(names)
	var out []Violation
	for _, name := range names {
		stored := byLock[name]
		slices.SortStableFunc(stored, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
		var newest *Interval
		var newestSeq int64
		for _, e := range stored {
			iv := v.leases[e.Token]
			if iv == nil {
				out = append(out, Violation{Lock: name, At: e.At, Client: e.Client, Token: e.Token,
					What: fmt.Sprintf("%sthe resource kept write #%d (fencing token %d) of token %.8s, which never held the lock", on(name), e.Seq, e.Fence, e.Token)})
				continue
			}
			if newest != nil && iv.Start < newest.Start {
				out = append(out, Violation{Lock: name, At: e.At, Client: iv.Client, Token: iv.Token,
					What: fmt.Sprintf("%sthe resource kept client %d's write #%d (lease %.8s, began at %v, fencing token %d) after write #%d of client %d's newer lease %.8s (began at %v)",
						on(name), iv.Client, e.Seq, iv.Token, iv.Start, e.Fence, newestSeq, newest.Client, newest.Token, newest.Start)})
				continue
			}
			newest, newestSeq = iv, e.Seq
		}
	}
	return out
}
