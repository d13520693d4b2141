package memnode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestDiskFull: on a full disk a node answers every command that would
// write with an error reply wrapping ErrDiskFull whose text starts as
// Redis's MISCONF reply does, and changes nothing; reads, and commands
// that find nothing to write, answer as usual; freed, it writes again.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	n := memnode.New("m0")
	if ok, err := n.Acquire(ctx, "held", "a", time.Minute); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, err := n.Release(ctx, "guarded", "g", time.Minute); err != nil {
		t.Fatal(err)
	}
	n.SetDiskFull(true)
	misconf := func(what string, err error) {
		t.Helper()
		var reply interface{ RedisError() }
		if !errors.Is(err, memnode.ErrDiskFull) || !errors.As(err, &reply) || !strings.HasPrefix(err.Error(), "MISCONF ") {
			t.Errorf("%s on a full disk: %v, want a MISCONF error reply", what, err)
		}
	}
	ok, err := n.Acquire(ctx, "free", "b", time.Minute)
	misconf("an acquire of a free key", err)
	if ok {
		t.Error("the refused acquire says ok")
	}
	_, err = n.Extend(ctx, "held", "a", time.Hour)
	misconf("an extend of a held key", err)
	_, err = n.Release(ctx, "held", "a", time.Minute)
	misconf("a release of a held key", err)
	_, err = n.RaiseFence(ctx, "held", "a", 7)
	misconf("a fencing write-back", err)
	if ok, err := n.Acquire(ctx, "guarded", "g", time.Minute); ok || err != nil {
		t.Errorf("an acquire a guard refuses writes nothing: %v %v, want false, nil", ok, err)
	}
	if ok, err := n.Extend(ctx, "held", "other", time.Minute); ok || err != nil {
		t.Errorf("an extend of a key held by another writes nothing: %v %v, want false, nil", ok, err)
	}
	if _, err := n.Info(ctx); err != nil {
		t.Errorf("Info on a full disk: %v", err)
	}
	keys := n.Keys()
	if len(keys) != 1 || keys["held"] != "a" {
		t.Errorf("keys on a full disk: %v, want only held=a", keys)
	}
	n.SetDiskFull(false)
	if ok, err := n.Release(ctx, "held", "a", time.Minute); !ok || err != nil {
		t.Errorf("freed: release %v %v", ok, err)
	}
	if ok, err := n.Acquire(ctx, "free", "b", time.Minute); !ok || err != nil {
		t.Errorf("freed: acquire %v %v", ok, err)
	}
}

// TestDiskFullIsANodeErrorForTheLock: a lease whose masters' disks fill
// gets ErrNotExtended from Extend and ErrNotReleased from Unlock, not
// ErrLockLost, and its releases are retried: once the disks are free,
// Close leaves no key.
func TestDiskFullIsANodeErrorForTheLock(t *testing.T) {
	ctx := context.Background()
	ns := []*memnode.Node{memnode.New("m0"), memnode.New("m1"), memnode.New("m2")}
	c, err := redlock.New([]redlock.Node{ns[0], ns[1], ns[2]})
	if err != nil {
		t.Fatal(err)
	}
	mu, err := c.NewMutex("job", redlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := mu.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns[0].SetDiskFull(true)
	ns[1].SetDiskFull(true)
	if err := lease.Extend(ctx); !errors.Is(err, redlock.ErrNotExtended) || errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend on full disks: %v, want ErrNotExtended, not ErrLockLost", err)
	}
	if !lease.Valid() {
		t.Error("the lease lost its validity")
	}
	if err := lease.Unlock(ctx); !errors.Is(err, redlock.ErrNotReleased) || errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Unlock on full disks: %v, want ErrNotReleased, not ErrLockLost", err)
	}
	ns[0].SetDiskFull(false)
	ns[1].SetDiskFull(false)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if k := n.Keys(); len(k) != 0 {
			t.Errorf("%s keeps %v after Close", n.Addr(), k)
		}
	}
}
