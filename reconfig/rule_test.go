package reconfig

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestMastersCheckTheStepRule: the masters refuse a step that is not one
// step, whatever the changer checked: install is called here directly,
// past Step's own checks. A swap (quorums that need not meet), a joint
// configuration that does not keep the old set, a skipped
// epoch, a lowered drift factor, a quorum that is no majority, a wait
// below the key life and a master of the old set told it is added are
// refused with the reason; the one step is taken.
func TestMastersCheckTheStepRule(t *testing.T) {
	var addrs []string
	masters := map[string]redis.Cmdable{}
	for range 4 {
		s := redisproc.StartT(t, redisproc.Config{})
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		addrs = append(addrs, s.Addr())
		masters[s.Addr()] = c
	}
	ch := &Changer{Masters: masters}
	ctx := context.Background()
	e1 := Config{Epoch: 1, Masters: addrs[:3], Quorum: 2, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	if err := ch.Init(ctx, e1); err != nil {
		t.Fatal(err)
	}
	knobs.NoReconfigWait.Store(true) // this test is about the rule, not the wait
	defer knobs.NoReconfigWait.Store(false)
	part := func(m string) string {
		if m == addrs[3] {
			return "fresh"
		}
		return "member"
	}
	swap := Config{Epoch: 2, Masters: []string{addrs[0], addrs[1], addrs[3]}, Quorum: 2, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	skip := Config{Epoch: 3, Masters: addrs, Quorum: 3, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	shorter := Config{Epoch: 2, Masters: addrs, Quorum: 3, MaxKeyTTL: time.Millisecond, DriftFactor: 0.001}
	// A joint configuration whose old set is not the masters' set: neither
	// of its sets' quorums need meet a quorum of epoch 1's.
	strayJoint := Config{Epoch: 2, Masters: swap.Masters, Quorum: 2, Old: []string{addrs[1], addrs[2], addrs[3]}, OldQuorum: 2, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	for _, tc := range []struct {
		to   Config
		want string
	}{
		{swap, "refused: rule quorums of the old and the new configuration need not meet"},
		{strayJoint, "refused: rule quorums of the old and the new configuration need not meet"},
		{skip, "refused: rule epoch 1 -> 3"},
		{shorter, "refused: rule longest key life or drift factor lowered"},
	} {
		ans := ch.install(ctx, addrs[:3], tc.to, e1.Record(), part)
		for _, m := range addrs[:3] {
			if got := ans[m].String(); got != tc.want {
				t.Errorf("epoch %d, %d masters: %s answered %q, want %q", tc.to.Epoch, len(tc.to.Masters), m, got, tc.want)
			}
		}
	}
	// A quorum that is no majority of its set (3 of 4 would be; 2 is not).
	minority := Config{Epoch: 2, Masters: addrs, Quorum: 2, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	ans := ch.install(ctx, addrs[:3], minority, e1.Record(), part)
	if got := ans[addrs[0]].String(); got != "refused: rule quorum 2 of 4 masters is not a majority" {
		t.Errorf("a minority quorum: %q", got)
	}
	add := Config{Epoch: 2, Masters: addrs, Quorum: 3, MaxKeyTTL: time.Second, DriftFactor: 0.01}
	// A wait below the key life (here 0), sent past install.
	_, err := ch.call(ctx, addrs[0], "install", add.Record(), add.Text(), "0", "member", "", e1.Record())
	if why, _ := refusal(err); why != "rule wait 0 ms below the key life, its drift and a third" {
		t.Errorf("a wait of 0: %v", err)
	}
	// A master of the old set told it is added.
	_, err = ch.call(ctx, addrs[0], "install", add.Record(), add.Text(), "1344", "fresh", "", e1.Record())
	if why, _ := refusal(err); why != "member "+e1.Record() {
		t.Errorf("a member told it is fresh: %v", err)
	}
	ans = ch.install(ctx, addrs[:3], add, e1.Record(), part)
	for _, m := range addrs[:3] {
		if got := ans[m].String(); !strings.HasPrefix(got, "installed") {
			t.Errorf("the one step: %s answered %q", m, got)
		}
	}
}
