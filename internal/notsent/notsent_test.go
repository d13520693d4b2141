package notsent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/notsent"
	"github.com/quorumlock/quorumlock/redlock"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func dialErr(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: err}
}

func TestDial(t *testing.T) {
	refused := dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED))
	timedOut := dialErr(timeoutErr{})
	for _, tc := range []struct {
		name    string
		err     error
		notSent bool
	}{
		{"nil", nil, false},
		{"refused dial", refused, true},
		{"refused dial, wrapped", fmt.Errorf("pool: %w", refused), true},
		{"timed-out dial", timedOut, false},
		{"dial ended by the context", dialErr(context.DeadlineExceeded), false},
		{"dial: host unreachable", dialErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), false},
		{"refused read (not a dial)", &net.OpError{Op: "read", Err: syscall.ECONNREFUSED}, false},
		{"plain error", errors.New("boom"), false},
		{"context error", context.DeadlineExceeded, false},
	} {
		got := notsent.Dial(tc.err)
		assert.Equal(t, tc.notSent, errors.Is(got, redlock.ErrNotSent), tc.name)
		if tc.err == nil {
			assert.NoError(t, got)
			continue
		}
		assert.ErrorIs(t, got, tc.err, "%s: the cause stays in the chain", tc.name)
		assert.Contains(t, got.Error(), tc.err.Error(), "%s: the message names the cause", tc.name)
		if !tc.notSent {
			assert.True(t, got == tc.err, "%s: unchanged, got %v", tc.name, got)
		}
	}
}

// TestDialKnob: knobs.DialTimeoutNotSent restores the old rule (every failed
// dial counts as not sent), which the regression tests use to show the
// orphan key it leaves.
func TestDialKnob(t *testing.T) {
	knobs.DialTimeoutNotSent.Store(true)
	t.Cleanup(func() { knobs.DialTimeoutNotSent.Store(false) })
	assert.ErrorIs(t, notsent.Dial(dialErr(timeoutErr{})), redlock.ErrNotSent)
	assert.NotErrorIs(t, notsent.Dial(&net.OpError{Op: "read", Err: timeoutErr{}}), redlock.ErrNotSent)
}

// TestDialRealRefusal: the error a real refused dial returns is not sent.
func TestDialRealRefusal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
		t.Skipf("something listens on %s again", addr)
	}
	assert.ErrorIs(t, notsent.Dial(err), redlock.ErrNotSent, "%v", err)
}
