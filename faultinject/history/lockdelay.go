package history

import (
	"fmt"
	"time"
)

// LockDelay checks what WithLockDelay promises. Once a lease's validity has
// ended without Unlock (it expired, was lost, or its holder died), no
// conflicting lease of the lock is granted until the lock delay (the
// Acquired event's Delay) has passed after that validity deadline, so that
// writes still in flight from the old holder land before a new holder
// starts. An Unlock cuts the delay short from the moment it begins. A
// lease's deadline is the latest its events recorded (an extension the
// history does not record makes the judge miss a violation, never report a
// false one). A grant while the older lease is still believed valid is
// MutualExclusion's, not this one's.
var LockDelay = Invariant{
	Name:  "lock-delay",
	About: "no lease is granted while a conflicting lease of the lock, whose validity ended without Unlock, is within the lock delay of that end",
	Class: Exclusion,
	// The delay protects unfenced writes in flight; a fenced resource
	// orders a late write of the old holder by its token instead.
	FencingAbsorbs: true,
	judge:          judgeLockDelay,
}

// free returns when the lock delay of a lets the lock go: the validity
// deadline plus the delay, or the Unlock before that.
func (iv *Interval) free() time.Duration {
	f := iv.Until + iv.Delay
	if iv.Unlocked {
		f = min(f, iv.UnlockAt)
	}
	return f
}

// judgeLockDelay compares, per lock, every lease with a lock delay with the
// conflicting leases granted from the end of its belief (End) to free.
func judgeLockDelay(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, l := range v.locks {
		for _, a := range l.leases {
			if a.Delay <= 0 || !a.granted() {
				continue
			}
			free := a.free()
			for _, b := range l.leases {
				if b == a || b.Start < a.End || b.Start >= free || !b.granted() || !a.conflicts(b) {
					continue
				}
				unlock := "no Unlock"
				if a.Unlocked {
					unlock = fmt.Sprintf("Unlock at %v", a.UnlockAt)
				}
				out = append(out, Violation{Lock: l.name, At: b.Start, Client: b.Client, Token: b.Token,
					What: fmt.Sprintf("%sc%d's lease %.8s%s was granted at %v, %v before the lock delay (%v) of c%d's lease %.8s (validity until %v, %s) let the lock go at %v",
						on(l.name), b.Client, b.Token, b.label(), b.Start, free-b.Start, a.Delay, a.Client, a.Token, a.Until, unlock, free)})
			}
		}
	}
	return out
}
