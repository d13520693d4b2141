package history

import (
	"testing"
	"time"
)

func TestRegisterAndRecorder(t *testing.T) {
	c := NewRefClock()
	h := &Recorder{}
	r := NewRegister(c, h, false)
	until := c.Of(time.Now().Add(time.Hour))
	h.Add(Event{Client: 0, Kind: Acquired, At: c.Now(), Until: until, Token: "a", Holds: 1})
	if !r.Write(0, "a", 0, until, "v1") || !r.Write(0, "a", 0, until, "v0") || r.Value() != "v0" {
		t.Fatalf("a register without fencing refused a write or lost it (value %q)", r.Value())
	}
	r2 := NewRegister(c, h, true)
	if !r2.Write(0, "a", 7, until, "v2") || r2.Write(0, "a", 6, until, "v3") || r2.Value() != "v2" {
		t.Fatalf("a fencing register accepted a token below the highest, or refused one at it (value %q)", r2.Value())
	}
	if h.Acquisitions() != 1 {
		t.Errorf("Acquisitions = %d, want 1", h.Acquisitions())
	}
	ev := h.Events()
	if len(ev) != 5 || ev[3].Kind != WriteAccepted || ev[4].Kind != WriteRejected || ev[4].Fence != 6 {
		t.Fatalf("events = %+v", ev)
	}
	if f := Check(ev); len(f.Violations) != 0 || f.Rejected != 1 || !f.Fenced {
		t.Errorf("Check = %+v", f)
	}
	if ev[1].At < ev[0].At {
		t.Errorf("reference clock went backwards: %v then %v", ev[0].At, ev[1].At)
	}
}
