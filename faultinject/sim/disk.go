package sim

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/quorumlock/quorumlock/node/memnode"
)

// MisconfFinal is the simulator's own switch (the coordinator has no knob
// for it; knobVars names it "MisconfFinal"): the links turn a full disk's
// MISCONF reply (memnode.ErrDiskFull) into an error reply the coordinator
// does not know as one that asks to try later, as a coordinator that took
// MISCONF for a final answer would see it. A release so answered is then
// not retried, and its key outlives the clients' Close: family Disks must
// find that (TestKnobsAreCaught). The coordinator retries it
// (redlock/release.go, serverBusy).
var MisconfFinal atomic.Bool

// finalReply is an error reply (it has go-redis's RedisError mark) that
// asks for no retry.
type finalReply struct{ error }

// RedisError marks the error as a server's reply.
func (finalReply) RedisError() {}

func (e finalReply) Unwrap() error { return e.error }

// misconfFinal rewrites a full disk's reply as MisconfFinal says.
func misconfFinal(err error) error {
	if err == nil || !MisconfFinal.Load() || !errors.Is(err, memnode.ErrDiskFull) {
		return err
	}
	return finalReply{fmt.Errorf("ERR disk full (the MISCONF reply, taken as final): %v", err)}
}
