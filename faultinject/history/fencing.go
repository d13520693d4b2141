package history

import (
	"cmp"
	"fmt"
	"slices"
)

// TokenOrder checks that fencing tokens strictly rise in the order leases of
// a lock are granted.
var TokenOrder = Invariant{
	Name:  "token-order",
	About: "each lease of a lock gets a fencing token above the previous lease's (in the order they were granted)",
	Class: Fencing,
	judge: judgeTokenOrder,
}

// FencedWriteOrder checks that a fenced resource never accepts an older
// lease's write after a newer lease's.
var FencedWriteOrder = Invariant{
	Name:  "fenced-write-order",
	About: "a fenced resource never accepts the write of a lease granted earlier after the write of one granted later",
	Class: Fencing,
	judge: judgeFencedWriteOrder,
}

// NewerWriteAccepted checks that a fenced resource never refuses the write
// of the newest lease that wrote: its token would be below an older one's.
var NewerWriteAccepted = Invariant{
	Name:  "newer-write-accepted",
	About: "a fenced resource never refuses the write of a lease newer than every lease whose write it accepted (the tokens went backwards)",
	Class: Fencing,
	judge: judgeNewerWriteAccepted,
}

// judgeTokenOrder compares consecutive leases of each lock whose leases
// carry fencing tokens.
func judgeTokenOrder(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, l := range v.locks {
		if !l.fencedLeases {
			continue
		}
		for i := 1; i < len(l.leases); i++ {
			a, prev := l.leases[i], l.leases[i-1]
			if a.Fence <= prev.Fence {
				out = append(out, Violation{Lock: l.name, At: a.Start, Client: a.Client, Token: a.Token,
					What: fmt.Sprintf("%sfencing token %d (c%d at %v) not above %d (c%d at %v)", on(l.name), a.Fence, a.Client, a.Start, prev.Fence, prev.Client, prev.Start)})
			}
		}
	}
	return out
}

// fencedWrites walks each fenced lock's writes in the resource's order (it
// timestamps a write while it holds its lock, so At orders them as it
// decided them), calling visit with each leased write and the
// latest-starting lease with an accepted write before it (nil: none yet)
// and that write's token.
func fencedWrites(v *view, visit func(l *lockView, e Event, iv, newest *Interval, newestFence int64)) {
	for _, l := range v.locks {
		if !l.fenced {
			continue
		}
		writes := slices.Clone(l.writes)
		slices.SortStableFunc(writes, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
		var newest *Interval
		var newestFence int64
		for _, e := range writes {
			iv := v.leases[e.Token]
			if iv == nil {
				continue // LeasedWrites
			}
			visit(l, e, iv, newest, newestFence)
			if e.Kind == WriteAccepted && (newest == nil || iv.Start >= newest.Start) {
				newest, newestFence = iv, e.Fence
			}
		}
	}
}

func judgeFencedWriteOrder(v *view, _ *Findings) []Violation {
	var out []Violation
	fencedWrites(v, func(l *lockView, e Event, iv, newest *Interval, newestFence int64) {
		if e.Kind == WriteAccepted && newest != nil && newest.Start > iv.Start {
			out = append(out, Violation{Lock: l.name, At: e.At, Client: e.Client, Token: e.Token,
				What: fmt.Sprintf("%sclient %d's write at %v (lease %.8s, began at %v) was accepted with fencing token %d after client %d's newer lease %.8s (began at %v, token %d) had written",
					on(l.name), e.Client, e.At, e.Token, iv.Start, e.Fence, newest.Client, newest.Token, newest.Start, newestFence)})
		}
	})
	return out
}

func judgeNewerWriteAccepted(v *view, _ *Findings) []Violation {
	var out []Violation
	fencedWrites(v, func(l *lockView, e Event, iv, newest *Interval, newestFence int64) {
		if e.Kind != WriteRejected || newest != nil && iv.Start <= newest.Start {
			return
		}
		reason := "by a fenced resource that accepted no write yet"
		if newest != nil {
			reason = fmt.Sprintf("with fencing token %d, below %d of client %d's older lease %.8s (began at %v, this one at %v): the tokens went backwards",
				e.Fence, newestFence, newest.Client, newest.Token, newest.Start, iv.Start)
		}
		out = append(out, Violation{Lock: l.name, At: e.At, Client: e.Client, Token: e.Token,
			What: fmt.Sprintf("%sclient %d's write at %v (lease %.8s) was refused %s", on(l.name), e.Client, e.At, e.Token, reason)})
	})
	return out
}
