package history

import (
	"strings"
	"testing"
)

// TestLockDelay: a grant after a lease's validity ended without Unlock
// breaks the lock delay until it has run; an Unlock cuts it short, a read
// lease does not wait for another, and a lease without a delay frees the
// lock at its end.
func TestLockDelay(t *testing.T) {
	crashed := delayed(0, "a", 0, 500*ms, 400*ms, -1)
	cases := []struct {
		name string
		ev   []Event
		want string // "" for a clean history
	}{
		{"within the delay", concat(crashed, lease(1, "b", 899*ms, 1400*ms, -1, 950*ms)),
			"c1's lease b was granted at 899ms, 1ms before the lock delay (400ms) of c0's lease a (validity until 500ms, no Unlock) let the lock go at 900ms"},
		{"the same client", concat(crashed, lease(0, "b", 600*ms, 1100*ms, -1, 650*ms)), "c0's lease b was granted at 600ms"},
		{"once the delay has run", concat(crashed, lease(1, "b", 900*ms, 1400*ms, -1, 950*ms)), ""},
		{"unlocked before the end", concat(delayed(0, "a", 0, 500*ms, 400*ms, 300*ms), lease(1, "b", 300*ms, 800*ms, -1, 350*ms)), ""},
		{"unlocked after the end", concat(delayed(0, "a", 0, 500*ms, 400*ms, 700*ms), lease(1, "b", 700*ms, 1200*ms, -1, 750*ms)), ""},
		{"granted before the late Unlock", concat(delayed(0, "a", 0, 500*ms, 400*ms, 700*ms), lease(1, "b", 650*ms, 1200*ms, -1, 750*ms)),
			"(validity until 500ms, Unlock at 700ms) let the lock go at 700ms"},
		{"extended", concat(crashed, []Event{{Client: 0, Kind: Covered, At: 400 * ms, Token: "a", Until: 800 * ms, Copies: 2, Quorum: 2}},
			lease(1, "b", 1100*ms, 1600*ms, -1, 1150*ms)), "let the lock go at 1.2s"},
		{"no delay", concat(lease(0, "a", 0, 500*ms, -1, -1), lease(1, "b", 500*ms, 1000*ms, -1, 550*ms)), ""},
		{"readers", concat(sharedDelayed(0, "a"), sharedDelayed(1, "b")[:1]), ""},
		{"another lock", concat(withLock("x", crashed), withLock("y", lease(1, "b", 600*ms, 1100*ms, -1, 650*ms))), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Check(tc.ev)
			vs := f.Of(&LockDelay)
			if tc.want == "" {
				if len(f.Violations) != 0 {
					t.Fatalf("clean history, got:\n%s", whats(f.Violations))
				}
				return
			}
			if len(vs) != 1 || !strings.Contains(vs[0].What, tc.want) || len(f.Violations) != 1 {
				t.Fatalf("want one lock-delay violation containing %q, got:\n%s", tc.want, whats(f.Violations))
			}
			if v := vs[0]; v.Client != tc.ev[len(tc.ev)-2].Client || v.Token != "b" {
				t.Errorf("violation %+v: want it on lease b", v)
			}
		})
	}
}

// sharedDelayed returns a read lease of client c with token tok and a lock
// delay of 400ms, valid [0, 500ms) for c 0, granted at 600ms for others.
func sharedDelayed(c int, tok string) []Event {
	at := 0 * ms
	if c > 0 {
		at = 600 * ms
	}
	return []Event{{Client: c, Kind: Acquired, At: at, Until: at + 500*ms, Token: tok, Holds: 1, Shared: true, Delay: 400 * ms}}
}
