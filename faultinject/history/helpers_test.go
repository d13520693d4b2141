package history

import (
	"strings"
	"time"
)

const ms = time.Millisecond

// lease returns the events of one clean exclusive lease of client c with
// token tok: acquired at a with validity until u, a write at w (if
// w >= 0), unlock at un (if un >= 0).
func lease(c int, tok string, a, u, w, un time.Duration) []Event {
	ev := []Event{{Client: c, Kind: Acquired, At: a, Until: u, Token: tok, Holds: 1}}
	if w >= 0 {
		ev = append(ev, Event{Client: c, Kind: WriteAccepted, At: w, Token: tok})
	}
	if un >= 0 {
		ev = append(ev, Event{Client: c, Kind: Unlock, At: un, Token: tok})
	}
	return ev
}

// delayed returns the events of an exclusive lease of client c with token
// tok and lock delay d: acquired at a with validity until u, unlock at un
// (if un >= 0).
func delayed(c int, tok string, a, u, d, un time.Duration) []Event {
	ev := lease(c, tok, a, u, -1, un)
	ev[0].Delay = d
	return ev
}

// fenced returns the events of a fenced lease of client c with token
// fence: acquired at a with validity until u, one write at w (accepted or
// not), unlock right after.
func fenced(c int, tok string, a, u, w time.Duration, fence int64, accepted bool) []Event {
	kind := WriteAccepted
	if !accepted {
		kind = WriteRejected
	}
	return []Event{{Client: c, Kind: Acquired, At: a, Until: u, Token: tok, Fence: fence, Holds: 1},
		{Client: c, Kind: kind, At: w, Token: tok, Fence: fence},
		{Client: c, Kind: Unlock, At: w, Token: tok}}
}

func concat(evs ...[]Event) []Event {
	var out []Event
	for _, e := range evs {
		out = append(out, e...)
	}
	return out
}

// whats joins the violations' texts.
func whats(vs []Violation) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.What)
	}
	return strings.Join(out, "\n")
}
