package history

import "fmt"

// NoOrphans checks that after every client closed, no key (or shape hold) is
// left on a master, except where the coordinator documents it: a release the
// master refused without applying it (ReleaseRefused), a straggling
// acquire applied after its release's guard expired (Overtaken beyond the
// guard), or a value of a line entry that came back with a master's lost
// AOF tail after the entry's removal (Restored). Each expires with its TTL.
var NoOrphans = Invariant{
	Name:  "no-orphans",
	About: "after every client closed, no key or hold is left on a master, except after a release refused unsent, a straggler past the release guard or a line entry restored by a lost AOF tail",
	Class: Cleanup,
	judge: judgeOrphans,
}

// KeysExpire checks that one TTL after every client closed, nothing is left
// at all.
var KeysExpire = Invariant{
	Name:  "keys-expire",
	About: "one TTL after every client closed, no key or hold is left on any master",
	Class: Cleanup,
	judge: judgeKeysExpire,
}

// left is a value on a master.
type left struct {
	node  int
	token string
}

// excusedLeft returns the values that the coordinator documents it may
// leave on a master until their TTL: those whose release the master
// refused unsent, stragglers applied past their release's guard, and the
// values of line entries a lost AOF tail brought back after their removal.
func excusedLeft(v *view) map[left]bool {
	excused := map[left]bool{}
	for _, e := range append(v.of(ReleaseRefused), v.of(Restored)...) {
		excused[left{e.Node, e.Token}] = true
	}
	for _, e := range v.of(Overtaken) {
		if beyondGuard(e) {
			excused[left{e.Node, e.Token}] = true
		}
	}
	return excused
}

func judgeOrphans(v *view, _ *Findings) []Violation {
	excused := excusedLeft(v)
	var out []Violation
	for _, e := range v.of(Leftover) {
		if !excused[left{e.Node, e.Token}] {
			out = append(out, Violation{Lock: e.Lock, At: e.At, Token: e.Token,
				What: fmt.Sprintf("orphan %s on m%d after every client closed", e.Note, e.Node)})
		}
	}
	return out
}

func judgeKeysExpire(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, e := range v.of(Outlived) {
		out = append(out, Violation{Lock: e.Lock, At: e.At, Token: e.Token,
			What: fmt.Sprintf("%s still on m%d one TTL after every client closed", e.Note, e.Node)})
	}
	return out
}
