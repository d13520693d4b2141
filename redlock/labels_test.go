package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// The labels the logger and the observe modules (through internal/obslabel)
// derive from the events' errors: every value, from errors shaped as the
// client builds them.
func TestLabelsFromErrors(t *testing.T) {
	qe := func(sentinels []error, nodes ...error) *QuorumError {
		e := &QuorumError{Op: "lock", Key: "k", Quorum: 2, errs: sentinels}
		for _, n := range nodes {
			e.Nodes = append(e.Nodes, NodeResult{Node: "n", Err: n})
		}
		return e
	}
	notObtained := []error{ErrNotObtained}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{qe([]error{ErrNotObtained, context.Canceled}, ErrNodeTaken), "canceled"},
		{fmt.Errorf("%w %q: %w", ErrNotObtained, "k", ErrClosed), "closed"},
		{qe([]error{ErrNotObtained, ErrInvalidConfig}, nil), "invalid"},
		{fmt.Errorf("%w: %q was already unlocked", ErrReleased, "k"), "ended"},
		{qe([]error{ErrLockLost}, ErrNodeNotHeld, ErrNodeNotHeld, nil), "lost"},
		{qe([]error{ErrNotObtained, ErrValidityTooShort}, nil, nil), "too_late"},
		{qe(notObtained, ErrNodeTaken, fmt.Errorf("x: %w", ErrNodeDenied)), "denied"},
		// A node's deadline is in its result, not in the chain: the
		// caller's context did not end.
		{qe(notObtained, ErrNodeTaken, context.DeadlineExceeded, nil), "contended"},
		{qe(notObtained, ErrNodeBusy, ErrNoReply, nil), "no_quorum"},
	} {
		if got := outcomeOf(c.err); got != c.want {
			t.Errorf("outcomeOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "yes"}, {ErrNodeTaken, "taken"}, {ErrNodeNotHeld, "not_held"}, {ErrNodeQuarantined, "quarantined"},
		{ErrNodeBusy, "busy"}, {fmt.Errorf("n: %w", ErrNodeDenied), "denied"}, {fmt.Errorf("n: %w", context.DeadlineExceeded), "timeout"},
		{context.Canceled, "canceled"}, {fmt.Errorf("n: %w", ErrNotSent), "refused"}, {errors.New("WRONGTYPE"), "error"},
	} {
		if got := voteOf(c.err); got != c.want {
			t.Errorf("voteOf(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		e    LeaseEndEvent
		want string
	}{
		{LeaseEndEvent{}, "released"},
		{LeaseEndEvent{Err: ErrLockLost, Expired: true}, "expired"},
		{LeaseEndEvent{Err: ErrLockLost}, "lost"},
	} {
		if got := leaseEndOf(c.e); got != c.want {
			t.Errorf("leaseEndOf(%+v) = %q, want %q", c.e, got, c.want)
		}
	}
	for _, c := range []struct {
		e    NodeStateEvent
		want string
	}{
		{NodeStateEvent{Delta: 1}, "queued"},
		{NodeStateEvent{Delta: 0}, "queued"}, // merged into a queued one
		{NodeStateEvent{Delta: -1}, "done"},
		{NodeStateEvent{Delta: -1, Err: errors.New("WRONGTYPE")}, "dropped"},
		{NodeStateEvent{Delta: -1, Err: errAbandoned}, "abandoned"},
		{NodeStateEvent{Delta: 0, Err: errAbandoned}, "abandoned"},
	} {
		if got := backlogChangeOf(c.e); got != c.want {
			t.Errorf("backlogChangeOf(%+v) = %q, want %q", c.e, got, c.want)
		}
	}
}
