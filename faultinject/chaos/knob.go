package chaos

import (
	"slices"
	"sync/atomic"

	"github.com/quorumlock/quorumlock/internal/knobs"
)

// Knobs returns the safety switches a scenario may name (Scenario.Knob),
// by name: those of internal/knobs that the nodes read on each call, and
// those the coordinator reads when a client is made (Run sets the switch
// before it makes the clients).
func Knobs() map[string]*atomic.Bool {
	return map[string]*atomic.Bool{
		"NoRunStamp":   &knobs.NoRunStamp,
		"WallUptime":   &knobs.WallUptime,
		"NoQuarantine": &knobs.NoQuarantine,
		"NoFenceEpoch": &knobs.NoFenceEpoch,
		"NoDrift":      &knobs.NoDrift,
	}
}

func knobNames() []string {
	var out []string
	for k := range Knobs() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
