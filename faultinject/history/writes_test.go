package history

import (
	"strings"
	"testing"
)

func TestStaleWriteAfterValidity(t *testing.T) {
	// Client 0 checked its lease, paused, and wrote 300ms after its
	// validity ended; nobody else took the lock meanwhile.
	ev := []Event{{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a", Holds: 1},
		{Client: 0, Kind: Paused, At: 2 * ms, Token: "a"},
		{Client: 0, Kind: WriteAccepted, At: 1290 * ms, Token: "a"},
		{Client: 0, Kind: Unlock, At: 1291 * ms, Token: "a"}}
	f := Check(ev)
	if len(f.Overlaps) != 0 {
		t.Errorf("Overlaps = %v, want none (the interval ends at the validity)", f.Overlaps)
	}
	stale := f.Of(&FreshWrites)
	if len(stale) != 1 || !strings.Contains(stale[0].What, "300ms after its lease's validity ended") || !stale[0].Paused {
		t.Fatalf("stale writes = %v, want one 300ms after the validity, by a paused writer", stale)
	}
	// Lease.Valid is false from Until on: a write at Until is stale; one
	// just before is not.
	ev[2].At = 990 * ms
	if got := len(Check(ev).Of(&FreshWrites)); got != 1 {
		t.Errorf("a write at Until: %d stale writes, want 1", got)
	}
	ev[2].At = 989 * ms
	if f := Check(ev); len(f.Violations) != 0 {
		t.Errorf("a write before Until: %s", whats(f.Violations))
	}
}

func TestStaleWriteAfterLaterLease(t *testing.T) {
	// Client 0's write at 500ms is inside its own validity but after
	// client 1's lease began at 400ms (client 0 had already unlocked in
	// its own view, so there is no overlap: the write is the violation).
	ev := []Event{
		{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a", Holds: 1},
		{Client: 0, Kind: Unlock, At: 300 * ms, Token: "a"},
		{Client: 1, Kind: Acquired, At: 400 * ms, Until: 1390 * ms, Token: "b", Holds: 1},
		{Client: 0, Kind: WriteAccepted, At: 500 * ms, Token: "a"},
		{Client: 1, Kind: Unlock, At: 600 * ms, Token: "b"},
	}
	f := Check(ev)
	stale := f.Of(&FreshWrites)
	if len(f.Overlaps) != 0 || len(stale) != 1 || stale[0].Client != 0 || stale[0].Paused || len(f.Violations) != 1 {
		t.Fatalf("want only client 0's write, not paused:\n%s", whats(f.Violations))
	}
	// A reader began meanwhile: stale for a writer (the write lease and
	// the read lease conflict), not for another reader.
	ev[2].Shared = true
	if got := len(Check(ev).Of(&FreshWrites)); got != 1 {
		t.Errorf("a writer's write after a reader began: %d stale, want 1", got)
	}
	ev[0].Shared = true
	if f := Check(ev); len(f.Violations) != 0 {
		t.Errorf("a reader's write after another reader began: %s", whats(f.Violations))
	}
}

func TestWriteWithoutLease(t *testing.T) {
	f := Check([]Event{{Client: 2, Kind: WriteAccepted, At: 1000 * ms, Token: "nobody"}})
	vs := f.Of(&LeasedWrites)
	if len(vs) != 1 || !strings.Contains(vs[0].String(), "never held") {
		t.Fatalf("want the write of a token without a lease, got:\n%s", whats(f.Violations))
	}
	// With fencing too.
	f = Check([]Event{{Client: 2, Kind: WriteAccepted, At: 1000 * ms, Token: "nobody", Fence: 4}})
	if len(f.Of(&LeasedWrites)) != 1 || !f.Fenced {
		t.Fatalf("fenced: want the write of a token without a lease, got:\n%s", whats(f.Violations))
	}
}
