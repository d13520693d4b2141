package memnode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// records returns two epochs of one configuration, and another
// configuration of the first epoch.
func records(t *testing.T) (e1, e2, other string) {
	t.Helper()
	c := wire.Config{Epoch: 1, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	e1 = c.Record()
	c.Epoch = 2
	e2 = c.Record()
	c.Epoch, c.Masters = 1, []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.4:6379"}
	return e1, e2, c.Record()
}

// setRecord is n.SetRecord, which must not fail.
func setRecord(t *testing.T, n *memnode.Node, record string) {
	t.Helper()
	if err := n.SetRecord(context.Background(), record); err != nil {
		t.Fatal(err)
	}
}

// TestConfigCheck: every call that counts a vote is checked against the
// master's record in the same step, with the reply redisnode's
// config_check.lua gives (TestConfigCheck there, on a real server);
// releases are not checked; a record of another run counts as none.
func TestConfigCheck(t *testing.T) {
	e1, e2, other := records(t)
	n := memnode.New("m1")
	ctx := memnode.WithRecord(context.Background(), e1)
	calls := map[string]func(key string) error{
		"Acquire": func(key string) error { _, err := n.Acquire(ctx, key, "v", time.Second); return err },
		"Extend":  func(key string) error { _, err := n.Extend(ctx, key, "v", time.Second); return err },
		"AcquireFenced": func(key string) error {
			_, _, err := n.AcquireFenced(ctx, key, "v", time.Second)
			return err
		},
		"RaiseFence": func(key string) error { _, err := n.RaiseFence(ctx, key, "v", 7); return err },
		"AcquireQueued": func(key string) error {
			_, _, err := n.AcquireQueued(ctx, key, "v", time.Second, redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Second})
			return err
		},
		"AcquireHold": func(key string) error {
			_, err := n.AcquireHold(ctx, key, redlock.Hold{Group: "g", ID: "h"}, time.Second)
			return err
		},
		"ExtendHold": func(key string) error {
			_, err := n.ExtendHold(ctx, key, redlock.Hold{Group: "g", ID: "h"}, time.Second)
			return err
		},
	}
	refused := func(t *testing.T, err error, reply string, stale bool) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), reply) || errors.Is(err, redlock.ErrConfigStale) != stale || !strings.Contains(err.Error(), "m1") {
			t.Errorf("got %v, want the reply %q naming the node, ErrConfigStale %v", err, reply, stale)
		}
		var rerr interface{ RedisError() }
		if !errors.As(err, &rerr) {
			t.Errorf("%v: not marked as the master's reply", err)
		}
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			setRecord(t, n, "")
			refused(t, call(name), "QLCONFIG none", false)

			setRecord(t, n, e1)
			if err := call(name); err != nil {
				t.Errorf("the same record: %v", err)
			}

			// The same record, then a restart that keeps the keys: the
			// record is of another run.
			n.Restart(true)
			refused(t, call(name), "QLCONFIG none", false)
			knobs.NoConfigRun.Store(true)
			err := call(name)
			knobs.NoConfigRun.Store(false)
			if err != nil {
				t.Errorf("NoConfigRun trusts a record of another run: %v", err)
			}

			setRecord(t, n, e2)
			refused(t, call(name), "QLCONFIG stale "+e2, true)
			setRecord(t, n, other)
			refused(t, call(name), "QLCONFIG differs "+other, true)
			setRecord(t, n, "2 removed")
			refused(t, call(name), "QLCONFIG stale 2 removed", true)
			n.Restart(false)
			refused(t, call(name), "QLCONFIG none", false)
		})
	}

	// A master behind the client: a failed vote, and nothing changed.
	setRecord(t, n, e1)
	_, err := n.Acquire(memnode.WithRecord(context.Background(), e2), "behind", "v", time.Second)
	refused(t, err, "QLCONFIG behind "+e1, false)
	if _, held := n.Keys()["behind"]; held {
		t.Error("a refused call took the key")
	}

	// Releases are never checked: a stale client deletes its own key.
	if ok, err := n.Acquire(ctx, "mine", "v", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	setRecord(t, n, e2)
	if ok, err := n.Release(ctx, "mine", "v", time.Second); !ok || err != nil {
		t.Errorf("a stale client's release: %v %v", ok, err)
	}

	// The record is not a lock's key, and a lock of its name meets the
	// wrong type, as on Redis (a hash).
	if _, shown := n.Keys()[wire.ConfigKey]; shown {
		t.Error("Keys shows the configuration record")
	}
	if _, err := n.Acquire(context.Background(), wire.ConfigKey, "v", time.Second); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a lock named %s: %v, want WRONGTYPE", wire.ConfigKey, err)
	}

	// knobs.NoConfigCheck: the call goes unchecked.
	knobs.NoConfigCheck.Store(true)
	_, err = n.Acquire(ctx, "unchecked", "v", time.Second)
	knobs.NoConfigCheck.Store(false)
	if err != nil {
		t.Errorf("NoConfigCheck: %v", err)
	}
}

// TestConfigBoundsTheKeyTTL: a call carrying a record whose key life is
// shorter than its TTL, or a malformed record, sends nothing.
func TestConfigBoundsTheKeyTTL(t *testing.T) {
	e1, _, _ := records(t)
	n := memnode.New("m1")
	setRecord(t, n, e1)
	_, err := n.Acquire(memnode.WithRecord(context.Background(), e1), "k", "v", time.Minute+time.Millisecond)
	if !errors.Is(err, redlock.ErrNotSent) || !errors.Is(err, redlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "1m0.001s") {
		t.Errorf("TTL above the key life: %v", err)
	}
	_, err = n.Extend(memnode.WithRecord(context.Background(), "1 single x"), "k", "v", time.Second)
	if !errors.Is(err, redlock.ErrNotSent) || !errors.Is(err, redlock.ErrInvalidConfig) || !strings.Contains(err.Error(), `"1 single x"`) {
		t.Errorf("a malformed record: %v", err)
	}
	if len(n.Keys()) != 0 {
		t.Errorf("keys %v after calls that sent nothing", n.Keys())
	}
}

// TestRecordSurvivesAsTheKeysDo: RestartFromCheckpoint brings back the
// checkpoint's record, written by the old run: it counts as none.
func TestRecordSurvivesAsTheKeysDo(t *testing.T) {
	e1, e2, _ := records(t)
	n := memnode.New("m1")
	setRecord(t, n, e1)
	n.Checkpoint()
	setRecord(t, n, e2)
	n.RestartFromCheckpoint()
	ctx := memnode.WithRecord(context.Background(), e1)
	if _, err := n.Acquire(ctx, "k", "v", time.Second); err == nil || !strings.Contains(err.Error(), "QLCONFIG none") {
		t.Errorf("the checkpoint's record of the old run: %v, want QLCONFIG none", err)
	}
	knobs.NoConfigRun.Store(true)
	defer knobs.NoConfigRun.Store(false)
	if ok, err := n.Acquire(ctx, "k", "v", time.Second); !ok || err != nil {
		t.Errorf("NoConfigRun: the rolled-back record %s is trusted: %v %v", e1, ok, err)
	}
}

// TestFenceEpochStamp: a counter raised by a client with a record is
// stamped with its epoch; an acquire at epoch f reads one stamped f - 1 or
// later as present and an older stamp (or none) as lost, unless
// knobs.NoConfigStamp (TestFenceEpochStamp in redisnode, on a real
// server).
func TestFenceEpochStamp(t *testing.T) {
	at := func(epoch int64) string {
		c := wire.Config{Epoch: epoch, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}
		return c.Record()
	}
	n := memnode.New("m1")
	// Counters 7 raised at epochs 1 and 2, and by a client without a
	// record, each under its own lock held by its raiser.
	for _, c := range []struct {
		key   string
		epoch int64
	}{{"e1", 1}, {"e2", 2}, {"none", 0}} {
		ctx := context.Background()
		if c.epoch > 0 {
			setRecord(t, n, at(c.epoch))
			ctx = memnode.WithRecord(ctx, at(c.epoch))
		}
		if ok, err := n.Acquire(ctx, c.key, "raiser", time.Minute); !ok || err != nil {
			t.Fatalf("%s: acquire: %v %v", c.key, ok, err)
		}
		if ok, err := n.RaiseFence(ctx, c.key, "raiser", 7); !ok || err != nil {
			t.Fatalf("%s: raise: %v %v", c.key, ok, err)
		}
	}
	setRecord(t, n, at(3))
	ctx := memnode.WithRecord(context.Background(), at(3))
	reads := map[string]func(key string) (int64, error){
		"AcquireFenced": func(key string) (int64, error) {
			_, f, err := n.AcquireFenced(ctx, key, "v", time.Second)
			return f, err
		},
		"AcquireQueued": func(key string) (int64, error) {
			_, f, err := n.AcquireQueued(ctx, key, "v", time.Second, redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Second})
			return f, err
		},
	}
	for name, read := range reads {
		for key, want := range map[string]int64{"e2": 7, "e1": 0, "none": 0} {
			for _, off := range []bool{false, true} {
				knobs.NoConfigStamp.Store(off)
				got, err := read(key)
				knobs.NoConfigStamp.Store(false)
				w := want
				if off {
					w = 7
				}
				if err != nil || got != w {
					t.Errorf("%s of a counter raised at %s, read at epoch 3 (NoConfigStamp %v): %d, %v; want %d", name, key, off, got, err, w)
				}
			}
		}
	}
}

// TestMalformedMasterRecord: a master record the check cannot read an
// epoch from refuses a call as stale, as config_check.lua does, and never
// takes the node down.
func TestMalformedMasterRecord(t *testing.T) {
	e1, _, _ := records(t)
	n := memnode.New("m1")
	ctx := memnode.WithRecord(context.Background(), e1)
	for _, rec := range []string{" ", "+1 single 60000 0123456789abcdef01234567", "-1 x", "junk"} {
		setRecord(t, n, rec)
		_, err := n.Acquire(ctx, "k", "v", time.Second)
		if !errors.Is(err, redlock.ErrConfigStale) {
			t.Errorf("master record %q: %v, want a stale refusal", rec, err)
		}
	}
	if _, _, err := wire.ParseRecord("+1 single 60000 0123456789abcdef01234567"); err == nil {
		t.Error("wire.ParseRecord took a signed epoch, which config_check.lua refuses")
	}
}
