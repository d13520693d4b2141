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
// past Step's own checks. A swap (quorums that need not meet), a skipped
// epoch and a lowered key life are refused by every master of the old set
// with the reason; the one step is taken.
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
	for _, tc := range []struct {
		to   Config
		want string
	}{
		{swap, "refused: rule quorums 2 and 2 of 4 masters need not meet"},
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
	add := Config{Epoch: 2, Masters: addrs, Quorum: 3, MaxKeyTTL: time.Millisecond, DriftFactor: 0.01}
	ans := ch.install(ctx, addrs[:3], add, e1.Record(), part)
	for _, m := range addrs[:3] {
		if got := ans[m].String(); !strings.HasPrefix(got, "installed") {
			t.Errorf("the one step: %s answered %q", m, got)
		}
	}
}
