package history

import "fmt"

// ReleaseGuard checks that no acquire applies on a master after the same
// value's release reached it, within the release guard (the orphan in the
// making the guard exists to refuse).
var ReleaseGuard = Invariant{
	Name:  "release-guard",
	About: "no acquire applies on a master within the release guard after the same value's release reached it (it would leave an orphan key)",
	Class: Exclusion,
	judge: judgeReleaseGuard,
}

// beyondGuard says whether an Overtaken acquire applied after its release's
// guard had expired: a straggler older than the guard, documented; its key
// expires on its own.
func beyondGuard(e Event) bool { return e.At-e.Released >= e.Guard }

func judgeReleaseGuard(v *view, _ *Findings) []Violation {
	var out []Violation
	for _, e := range v.of(Overtaken) {
		if beyondGuard(e) {
			continue
		}
		out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token,
			What: fmt.Sprintf("orphan: c%d's acquire of %s (%s) applied on m%d at %v after its release had (at %v)", e.Client, e.Lock, e.Note, e.Node, e.At, e.Released)})
	}
	return out
}
