// Package notsent decides when a failed node call certainly never reached
// its server (redlock.ErrNotSent). The coordinator skips the release of such
// a call and ends a release retry on it, so a wrong "not sent" leaves an
// orphan key: a late acquire the server had queued applies with a fresh TTL
// after the release was dropped. Every node (redisnode, and the simulator's
// network) classifies its dial errors here, so the rule is written once.
package notsent

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// Dial returns err wrapping redlock.ErrNotSent when it is a dial the server
// refused (ECONNREFUSED: no process listens, so nothing can be queued
// there), and err unchanged otherwise. A dial that timed out is unknown: a
// paused server whose accept queue is full times out new dials while it
// holds, unread, the commands of connections it had accepted; it runs them
// when it resumes. Call it only for a client that never re-sends a command
// on another connection (go-redis MaxRetries < 1).
func Dial(err error) error {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	if errors.Is(err, syscall.ECONNREFUSED) || knobs.DialTimeoutNotSent.Load() {
		return fmt.Errorf("%w: %w", redlock.ErrNotSent, err)
	}
	return err
}
