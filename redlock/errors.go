package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Match them with errors.Is; the errors returned by this
// package wrap them and carry details (see QuorumError and NodeError).
var (
	// ErrNotObtained: the lock was not acquired (held by others, too few
	// nodes answered, validity too short, or the context ended).
	ErrNotObtained = errors.New("redlock: lock not obtained")
	// ErrLockLost: the caller no longer holds the lock on a quorum (it
	// expired, was released, or was taken over), or its local validity has
	// passed.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrNotExtended: Extend did not reach a quorum, for reasons other than
	// the lock being lost (for example nodes timed out). The lease keeps its
	// previous validity.
	ErrNotExtended = errors.New("redlock: lock not extended")
	// ErrNotReleased: Unlock could not confirm the release on a quorum,
	// because nodes failed or timed out or its context ended, while too few
	// nodes said the token was gone to call the lock lost. Failed releases
	// are retried in the background; the keys expire with their TTL at the
	// latest.
	ErrNotReleased = errors.New("redlock: release not confirmed")
	// ErrInvalidConfig is wrapped by every construction error.
	ErrInvalidConfig = errors.New("redlock: invalid configuration")

	// ErrNodeTaken (per node): the key is held by another owner.
	ErrNodeTaken = errors.New("redlock: held by another owner")
	// ErrNodeNotHeld (per node): the key no longer holds our token.
	ErrNodeNotHeld = errors.New("redlock: token not held")
	// ErrNodeRefused (per node): the node had already seen our release for
	// this token, so the acquire was refused.
	ErrNodeRefused = errors.New("redlock: acquire refused after release")
	// ErrNodeBusy (per node): the node already had the maximum number of our
	// calls in flight (it is slow or paused); it counted as failed without
	// being contacted.
	ErrNodeBusy = errors.New("redlock: node over its in-flight limit")
	// ErrNoReply (per node): no reply had arrived when the operation was
	// decided; the call may still complete in the background.
	ErrNoReply = errors.New("redlock: no reply yet")
	// ErrValidityTooShort: a quorum was reached, but too late: the remaining
	// validity was below the minimum.
	ErrValidityTooShort = errors.New("redlock: validity below minimum")
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// NodeError is the failure of one operation on one node.
type NodeError struct {
	// Node is the node's address (node.Node.Addr).
	Node string
	// Err is what went wrong: a per-node sentinel (ErrNodeTaken, ...), a
	// context error for a per-node deadline, or the transport error.
	Err error
}

func (e *NodeError) Error() string { return e.Node + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// Result classifies what one node did in one operation.
type Result int

const (
	// Pending: no reply yet when the operation was decided.
	Pending Result = iota
	// Succeeded: the node acquired, extended or released for us.
	Succeeded
	// Rejected: the node answered no (taken by another owner, token not held,
	// or acquire refused after a release).
	Rejected
	// Failed: the call failed (deadline, connection error, node busy).
	Failed
)

func (r Result) String() string {
	switch r {
	case Pending:
		return "pending"
	case Succeeded:
		return "succeeded"
	case Rejected:
		return "rejected"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// NodeOutcome is what one node did in one operation.
type NodeOutcome struct {
	Node   string
	Result Result
	// Err is nil for Succeeded, otherwise a *NodeError.
	Err error
	// Latency is the time from the start of the operation to this node's
	// reply; zero while Pending.
	Latency time.Duration
}

// QuorumError reports an operation that did not reach (or keep) a quorum.
// It wraps the operation's sentinel (ErrNotObtained, ErrLockLost or
// ErrNotExtended) and, when the caller's context ended, ctx.Err(). Node-level
// causes are in Nodes, not in the Unwrap chain, so errors.Is(err,
// context.DeadlineExceeded) reports the caller's deadline only.
type QuorumError struct {
	// Op is "lock", "extend" or "unlock".
	Op string
	// Key is the lock name.
	Key string
	// Quorum is the number of nodes needed; Succeeded how many said yes.
	Quorum, Succeeded int
	// Validity is the validity that remained when a quorum was reached too
	// late (ErrValidityTooShort); zero otherwise.
	Validity time.Duration
	// Nodes holds every node's outcome, in the order the nodes were given.
	Nodes []NodeOutcome

	errs []error
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString(e.errs[0].Error())
	fmt.Fprintf(&b, " %q: %d of %d nodes, quorum %d", e.Key, e.Succeeded, len(e.Nodes), e.Quorum)
	for _, extra := range e.errs[1:] {
		b.WriteString("; ")
		b.WriteString(extra.Error())
	}
	groups := map[string][]string{}
	var order []string
	for _, o := range e.Nodes {
		if o.Result == Succeeded {
			continue
		}
		var why string
		switch {
		case errorsIs(o.Err, ErrNodeTaken):
			why = "taken by another owner"
		case errorsIs(o.Err, ErrNodeNotHeld):
			why = "token not held"
		case errorsIs(o.Err, ErrNodeRefused):
			why = "refused after release"
		case o.Result == Pending:
			why = "no reply"
		default:
			why = "failed"
		}
		if _, ok := groups[why]; !ok {
			order = append(order, why)
		}
		item := o.Node
		if why == "failed" && o.Err != nil {
			var ne *NodeError
			if errors.As(o.Err, &ne) {
				item += " (" + ne.Err.Error() + ")"
			}
		}
		groups[why] = append(groups[why], item)
	}
	for _, why := range order {
		fmt.Fprintf(&b, "; %s: %s", why, strings.Join(groups[why], ", "))
	}
	return b.String()
}

// Unwrap returns the operation's sentinel, a more specific cause if any
// (ErrValidityTooShort), and ctx.Err() when the caller's context ended.
func (e *QuorumError) Unwrap() []error { return e.errs }

// NodesWith returns the addresses of the nodes whose outcome error matches
// target (errors.Is), e.g. NodesWith(ErrNodeTaken).
func (e *QuorumError) NodesWith(target error) []string {
	var out []string
	for _, o := range e.Nodes {
		if errorsIs(o.Err, target) {
			out = append(out, o.Node)
		}
	}
	return out
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }
