package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// KeptOut checks the waiting line's order (docs/verification.md, "The
// waiting line", the model's kept-out): a master refuses a waiter's acquire
// of a free key only for a live waiter ahead of it in that master's line
// that has not left it; never for the waiter's own tombstone (it left that
// line, and the same ID came back), never while it is first, and never
// behind a waiter that left that line (its LeaveQueue, or its fair grant,
// applied there: a Left event) and came back by a copy the network delayed
// (a waiter whose own current acquire applied there since, Refused or
// Queued and not Late, is back in its place: a grant leaves no tombstone,
// and a rolled-back waiter keeps its arrival). An acquire that applied
// after its caller stopped waiting (Refused.Late: a copy the network
// delayed) is not judged: keeping such copies out is what the tombstones
// and the requeue are for. Events at one instant count in their order.
var KeptOut = Invariant{
	Name:  "kept-out",
	About: "a master refuses a waiter the free key only for a live waiter ahead of it in its line that has not left that line",
	Class: Progress,
	judge: judgeKeptOut,
}

// Granted checks, within a bound, that a waiting Lock call ends (the
// model's granted, an LTL property, made bounded): a call that began
// (Waiting) gets the lock before the lock has been free for Within without
// a break, between the call's start and its end (its Acquired or GaveUp
// event, or the history's last event). The lock is busy while a lease of
// it is believed valid (a lease that was unlocked: until its Unlock
// began), and after a lease that ended without Unlock until the next lease
// is granted (its keys stay on the masters for a TTL the history does not
// know).
var Granted = Invariant{
	Name:  "granted",
	About: "a waiting Lock call gets the lock before the lock has stayed free for the call's bound",
	Class: Progress,
	judge: judgeGranted,
}

func judgeKeptOut(v *view, _ *Findings) []Violation {
	type at struct {
		lock  string
		node  int
		token string
	}
	events := slices.Clone(v.events)
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	// left: when a waiter left a master's line, while it has not come
	// back by its own current acquire.
	left := map[at]time.Duration{}
	var out []Violation
	for _, e := range events {
		k := at{e.Lock, e.Node, e.Token}
		switch {
		case e.Kind == Left:
			if _, ok := left[k]; !ok {
				left[k] = e.At
			}
		case e.Kind == Queued && !e.Late:
			delete(left, k)
		case e.Kind == Refused && !e.Late:
			why := ""
			switch pos := slices.Index(e.Line, e.Token); {
			case pos < 0:
				why = "it is not in that line (it left it: its own tombstone keeps it out)"
			case pos == 0:
				why = "it is first in that line"
			default:
				head := e.Line[0]
				if t, ok := left[at{e.Lock, e.Node, head}]; ok {
					why = fmt.Sprintf("the first in line, %s, had left that line at %v and came back", head, t)
				}
			}
			if why != "" {
				out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token,
					What: fmt.Sprintf("%sm%d refused c%d's waiter %s the free key at %v (line %q): %s", on(e.Lock), e.Node, e.Client, e.Token, e.At, e.Line, why)})
			}
			if slices.Contains(e.Line, e.Token) {
				delete(left, k) // its own current acquire: back in its place
			}
		}
	}
	return out
}

func judgeGranted(v *view, _ *Findings) []Violation {
	var last time.Duration
	for _, e := range v.events {
		last = max(last, e.At)
	}
	type span struct{ from, to time.Duration }
	var out []Violation
	for _, w := range v.of(Waiting) {
		if w.Within <= 0 {
			continue
		}
		// The call's end: its client's first Acquired or GaveUp of the lock
		// from its start.
		end, how, ended := last, "still waiting at the history's end", false
		for _, e := range v.events {
			if e.Client == w.Client && e.Lock == w.Lock && e.At >= w.At && (!ended || e.At < end) && (e.Kind == Acquired || e.Kind == GaveUp) {
				end, how, ended = e.At, map[Kind]string{Acquired: "granted", GaveUp: "gave up"}[e.Kind]+fmt.Sprintf(" at %v", e.At), true
			}
		}
		var busy []span
		for _, l := range v.locks {
			if l.name != w.Lock {
				continue
			}
			for i, iv := range l.leases {
				switch {
				case !iv.granted():
				case iv.Unlocked:
					busy = append(busy, span{iv.Start, max(iv.UnlockAt, iv.Start)})
				default:
					to := time.Duration(1<<63 - 1)
					for _, b := range l.leases[i+1:] {
						if b.Start >= iv.End {
							to = b.Start
							break
						}
					}
					busy = append(busy, span{iv.Start, to})
				}
			}
		}
		slices.SortFunc(busy, func(a, b span) int { return cmp.Compare(a.from, b.from) })
		free, cur := []span{}, w.At
		for _, b := range busy {
			if b.from > cur {
				free = append(free, span{cur, min(b.from, end)})
			}
			if cur = max(cur, b.to); cur >= end {
				break
			}
		}
		if cur < end {
			free = append(free, span{cur, end})
		}
		for _, f := range free {
			if f.to-f.from > w.Within {
				out = append(out, Violation{Lock: w.Lock, At: f.from + w.Within, Client: w.Client,
					What: fmt.Sprintf("%sc%d's Lock call, waiting since %v, did not get the lock within %v of its being free from %v (%s)", on(w.Lock), w.Client, w.At, w.Within, f.from, how)})
				break
			}
		}
	}
	return out
}
