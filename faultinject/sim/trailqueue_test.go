package sim

import (
	"strings"
	"testing"
)

// TestParseQueueTrail checks how ParseTrail translates a queue.pml trail
// (NoLeaveTombstone's): waiting Lock calls, each acquisition's acquires
// lost until the trail applies them, the late copy applied with its reply
// lost and its round's release reaching the master right after it, the
// LeaveQueues and the watch at their times, the fair lock and its backoff;
// and which trails it refuses.
func TestParseQueueTrail(t *testing.T) {
	s, tr := readModelTrail(t, "NoLeaveTombstone")
	if !tr.Queue || tr.Violation != "kept-out" || !s.Fair || s.Backoff != ModelTick || s.Wait != queueWait {
		t.Fatalf("trail %+v, script %v: want a fair queue trail breaking kept-out, backoff one tick", tr, s)
	}
	at := func(kind string, c, m int) ScriptCall {
		for _, e := range tr.Events {
			if e.Kind == kind && e.Args["c"] == c && e.Args["m"] == m {
				return ScriptCall{ApplyAt: e.At}
			}
		}
		t.Fatalf("no %s c=%d m=%d", kind, c, m)
		return ScriptCall{}
	}
	call := func(kind CallKind, c, m, att, seq int) ScriptCall {
		for _, cl := range s.Calls {
			if cl.Kind == kind && cl.Client == c && cl.Master == m && cl.Attempt == att && cl.Seq == seq {
				return cl
			}
		}
		t.Fatalf("no %v call c%d-m%d #%d.%d in\n%s", kind, c, m, att, seq, s)
		return ScriptCall{}
	}
	if cl := call(CallAcquire, 1, 0, 0, 0); cl.DropRequest || !cl.DropReply || cl.ApplyAt != at("lapply", 1, 0).ApplyAt {
		t.Errorf("the late copy: %v, want it applied at the lapply, its reply lost", cl)
	}
	if cl := call(CallRelease, 1, 0, 0, 0); cl.ApplyAt <= at("lapply", 1, 0).ApplyAt || cl.ApplyAt >= at("unlock", 0, 0).ApplyAt {
		t.Errorf("the late copy's rollback release: %v, want it right after the copy", cl)
	}
	for m := 1; m < 3; m++ {
		if cl := call(CallAcquire, 1, m, 0, 0); !cl.DropRequest {
			t.Errorf("c1's first acquire on m%d: %v, want it lost (the trail never applies it)", m, cl)
		}
		if cl := call(CallLeave, 1, m, 0, 0); cl.ApplyAt != at("leave", 1, m).ApplyAt {
			t.Errorf("c1's leave on m%d: %v, want it at its event", m, cl)
		}
		if cl := call(CallWatch, 1, m, 0, 0); cl.ApplyAt != at("watch", 1, 0).ApplyAt {
			t.Errorf("c1's watch on m%d: %v, want it at the watch event", m, cl)
		}
	}
	if cl := call(CallAcquire, 1, 0, 1, 0); cl.DropRequest || cl.DropReply || cl.ApplyAt != tr.Events[len(tr.Events)-1].At {
		t.Errorf("c1's second acquire on m0: %v, want it applied at the trail's last event", cl)
	}
	var ops []string
	for _, o := range s.Ops {
		ops = append(ops, o.Kind.String())
	}
	if got := strings.Join(ops, " "); got != "wait wait unlock" {
		t.Errorf("ops %q, want wait wait unlock", got)
	}

	s, tr = readModelTrail(t, "NoFreshLook")
	if !tr.Cycle || tr.Violation != "granted" || s.Backoff != queueNoBackoff || s.Duration < s.Wait+2*ModelTick {
		t.Errorf("NoFreshLook: trail %+v, script %v: want a cycle breaking granted, no backoff within the run, a run past the bound", tr, s)
	}

	const head = "# model/check.sh q: spin -t -p -DC=2 queue.pml\nEV start N=3 C=2 ETTL=2 STRAG=1 BACKOFF=1 FAIR=1\n"
	for _, bad := range []struct{ trail, want string }{
		{head + "EV lock c=0\nEV attempt c=0 g=0\nEV deadline c=0\nEV fail c=0 g=0\nEV watch c=0\nEV backoff c=0\n", `no script step for "backoff"`},
		{head + "EV lock c=0\nEV attempt c=0 g=0\nEV deadline c=0\nEV fail c=0 g=0\nEV watch c=0\nEV wake c=0\nEV tick\nEV attempt c=0 g=0\n", "the woken call attempts at once"},
		{head + "EV lock c=0\nEV attempt c=0 g=0\nEV cycle\nEV tick\nEV lock c=1\n", "1 events repeat in its cycle"},
		{head + "EV lock c=1\nEV tick\nEV lock c=0\n", "client 1's Lock call begins a millisecond before client 0's"},
	} {
		if _, _, err := ParseTrail(strings.NewReader(bad.trail)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("trail %q: err %v, want it refused: %s", bad.trail, err, bad.want)
		}
	}
}
