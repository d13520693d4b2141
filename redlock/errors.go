package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Match them with errors.Is; the errors returned by this
// package wrap them and carry details (see QuorumError).
var (
	// ErrNotObtained: the lock was not acquired (held by others, too few
	// nodes answered, validity too short, or the context ended).
	ErrNotObtained = errors.New("redlock: lock not obtained")
	// ErrLockLost: the lease can no longer be trusted: its validity ended,
	// or too many nodes no longer hold its token (expired or taken over).
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrReleased: the lease was unlocked.
	ErrReleased = errors.New("redlock: lease released")
	// ErrNotExtended: Extend did not reach a quorum for reasons other than
	// the lock being lost (nodes timed out or failed, or the context ended).
	// The lease keeps its previous validity.
	ErrNotExtended = errors.New("redlock: lock not extended")
	// ErrNotReleased: Unlock could not confirm the release on a quorum
	// because nodes failed or timed out, or its context ended, while too few
	// nodes said the token was gone to call the lock lost. Failed releases
	// are retried in the background; the keys expire with their TTL at the
	// latest.
	ErrNotReleased = errors.New("redlock: release not confirmed")
	// ErrValidityTooShort: a quorum was reached, but so late that the
	// remaining validity was below the minimum (WithMinValidity).
	ErrValidityTooShort = errors.New("redlock: validity below minimum")
	// ErrInvalidConfig is wrapped by every construction error, and by the
	// errors of a client that found one server listed under two addresses.
	ErrInvalidConfig = errors.New("redlock: invalid configuration")
	// ErrClosed: the client's Close was called; it takes no new locks.
	ErrClosed = errors.New("redlock: client closed")

	// ErrNodeTaken (per node, in QuorumError.Nodes): another owner holds
	// the key, or a release guard refused a late copy of our acquire.
	ErrNodeTaken = errors.New("redlock: held by another owner")
	// ErrNodeNotHeld (per node): the key no longer holds our token.
	ErrNodeNotHeld = errors.New("redlock: token not held")
	// ErrNodeBusy (per node): the node already had the maximum number of
	// this client's calls in flight (it is slow or paused), or this
	// client's last release of the lock there had not finished within the
	// node timeout; it counted as failed without being contacted.
	ErrNodeBusy = errors.New("redlock: node over its in-flight limit")
	// ErrNodeQuarantined (per node): the node's server restarted or failed
	// over (or is younger than the quarantine) and may have lost keys; its
	// yes vote was not counted (WithRestartQuarantine), though the key it
	// took is released like any other.
	ErrNodeQuarantined = errors.New("redlock: node in restart quarantine")
	// ErrNoReply (per node): no reply had arrived when the operation was
	// decided; the call may still complete in the background.
	ErrNoReply = errors.New("redlock: no reply yet")
	// ErrNodeDenied is wrapped by a Node's error when the server refused the
	// call for a reason that retrying cannot mend (a wrong password, a user
	// without the permission: Redis's WRONGPASS, NOAUTH, NOPERM). The
	// server's own reply stays in the chain (errors.As finds it). Lock and Do
	// stop retrying at once when an attempt fails with such a node.
	ErrNodeDenied = errors.New("redlock: node denied access")
	// ErrConfigStale is wrapped by a Node's error when the master refused
	// the call because the client's configuration record is not the
	// current one: the master is at a later epoch of its set, or at the
	// same epoch with another set (docs/reconfig.md). The client must load
	// the current configuration. Lock and Do stop retrying at once, and the
	// QuorumError of a lock or extend that met it wraps it too.
	ErrConfigStale = errors.New("redlock: configuration not current")
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// NodeResult is what one node did in one operation.
type NodeResult struct {
	// Node is the node's Addr.
	Node string
	// Err is nil when the node said yes; otherwise a per-node sentinel
	// (ErrNodeTaken, ErrNodeNotHeld, ErrNodeBusy, ErrNoReply), an error
	// wrapping context.DeadlineExceeded for the node's deadline, or the
	// node's own error (a Redis error reply reaches here as itself).
	Err error
}

// QuorumError reports an operation that did not reach (or keep) a quorum.
// It wraps the operation's sentinel (ErrNotObtained, ErrLockLost,
// ErrNotExtended or ErrNotReleased), a more specific cause when there is one
// (ErrValidityTooShort, ErrInvalidConfig), and ctx.Err() when the caller's
// context ended. Node-level causes are in Nodes, not in the Unwrap chain, so
// errors.Is(err, context.DeadlineExceeded) reports the caller's deadline
// only.
type QuorumError struct {
	// Op is "lock", "extend" or "unlock".
	Op string
	// Key is the lock name.
	Key string
	// Quorum is the number of nodes the operation needed; with
	// WithQuorumOf (joint mode), the first set's need (the message names
	// every set's).
	Quorum int
	// Nodes holds every node's result, in the order the nodes were given.
	Nodes []NodeResult

	errs []error
	// reached: a quorum said yes, yet no lease was handed out (too little
	// validity left, or the fencing write-back failed).
	reached bool
	// quorum, when set, is the quorum in full (joint mode names its sets).
	quorum *quorum
}

// succeeded counts the nodes that said yes.
func (e *QuorumError) succeeded() int {
	n := 0
	for _, r := range e.Nodes {
		if r.Err == nil {
			n++
		}
	}
	return n
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	if len(e.errs) == 0 {
		b.WriteString("redlock: quorum not reached")
	} else {
		b.WriteString(e.errs[0].Error())
	}
	q := strconv.Itoa(e.Quorum)
	if e.quorum != nil {
		q = e.quorum.String()
	}
	fmt.Fprintf(&b, " %q: %d of %d nodes, quorum %s", e.Key, e.succeeded(), len(e.Nodes), q)
	for _, extra := range e.errs[min(1, len(e.errs)):] {
		b.WriteString("; ")
		b.WriteString(extra.Error())
	}
	groups := map[string][]string{}
	var order []string
	for _, r := range e.Nodes {
		if r.Err == nil {
			continue
		}
		why, item := "failed", r.Node
		switch {
		case errors.Is(r.Err, ErrNodeTaken):
			why = "taken by another owner"
		case errors.Is(r.Err, ErrNodeNotHeld):
			why = "token not held"
		case errors.Is(r.Err, ErrNoReply):
			why = "no reply"
		case errors.Is(r.Err, ErrNodeQuarantined):
			why = "quarantined"
		case errors.Is(r.Err, ErrNodeDenied):
			why, item = "access denied", item+" ("+r.Err.Error()+")"
		case errors.Is(r.Err, ErrConfigStale):
			why, item = "configuration not current", item+" ("+r.Err.Error()+")"
		default:
			item += " (" + r.Err.Error() + ")"
		}
		if _, ok := groups[why]; !ok {
			order = append(order, why)
		}
		groups[why] = append(groups[why], item)
	}
	for _, why := range order {
		fmt.Fprintf(&b, "; %s: %s", why, strings.Join(groups[why], ", "))
	}
	return b.String()
}

// Unwrap returns the operation's sentinel, a more specific cause if any, and
// ctx.Err() when the caller's context ended.
// ErrConfigStale is among them when a node's result wraps it.
func (e *QuorumError) Unwrap() []error {
	for _, r := range e.Nodes {
		if errors.Is(r.Err, ErrConfigStale) {
			return append(e.errs[:len(e.errs):len(e.errs)], ErrConfigStale)
		}
	}
	return e.errs
}
