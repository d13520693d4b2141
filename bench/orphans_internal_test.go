package bench

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// TestLeftoversTellsDerivedKeys: leftovers traces quorumlock's derived
// keys to their entry and counts them by kind (fencing counters not at
// all), beside a peer's plain lock key.
func TestLeftoversTellsDerivedKeys(t *testing.T) {
	ms, err := ParseMasters([]string{redisproc.StartT(t, redisproc.Config{}).Addr()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := redis.NewClient(ms[0].GoRedisOptions(nil))
	defer c.Close()
	q := lockKey("r1", "quorumlock", 3, "low")
	peer := lockKey("r1", "redsync", 3, "low")
	for _, k := range []string{q, wire.GuardKey(q, "v"), wire.GuardKey(q, "w"), wire.QueueKey(q), wire.QueueTTLKey(q), wire.FenceKey(q), peer, lockKey("r2", "redsync", 3, "low")} {
		if err := c.Set(ctx, k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := leftovers(ctx, ms, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]leftover{
		entryID("quorumlock", 3, "low"): {keys: 1, guards: 2, queue: 2},
		entryID("redsync", 3, "low"):    {keys: 1},
	}
	if len(got) != len(want) || got[entryID("quorumlock", 3, "low")] != want[entryID("quorumlock", 3, "low")] || got[entryID("redsync", 3, "low")] != want[entryID("redsync", 3, "low")] {
		t.Errorf("leftovers = %+v, want %+v", got, want)
	}
}
