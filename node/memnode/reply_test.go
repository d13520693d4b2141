package memnode_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// A script's error reply (here WRONGTYPE: a mutex's release on a shared
// lock's key) is marked as a server's reply, as go-redis marks Redis's, so
// that the coordinator treats it alike on both: an answer, not retried.
func TestScriptErrorIsAReply(t *testing.T) {
	ctx := context.Background()
	n := memnode.New("mem-0")
	if _, err := n.AcquireHold(ctx, "k", redlock.Hold{Group: "r", ID: "r1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := n.Release(ctx, "k", "v", time.Minute)
	var reply interface{ RedisError() }
	if !errors.As(err, &reply) {
		t.Fatalf("Release on a shared lock's key: %v, want an error reply (RedisError)", err)
	}
}
