package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// Close(context.Background()) is bounded by the client's own timeouts when
// releases keep failing: a node that fails every call with a plain error
// (which used to keep the release retry looping forever, and a synctest
// bubble spinning), a paused node, and two failing nodes. It says which
// releases it abandoned, wrapping ErrNotReleased, and names the node.
func TestCloseWithoutDeadlineIsBounded(t *testing.T) {
	for _, fault := range []string{"plain-error", "paused", "two-failing"} {
		t.Run(fault, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(5)
				c, err := redlock.New(nodes)
				require.NoError(t, err)
				m := newMutex(t, c)
				warmUp(t, m)
				lease, err := m.TryLock(context.Background())
				require.NoError(t, err)
				// TryLock returns at a quorum: its calls to the others may
				// not have run yet, and one that ran after its node began
				// to fail would hold nothing there to release (about 1
				// run in 70 of two-failing).
				synctest.Wait()
				boom := errors.New("boom: not a Redis reply")
				switch fault {
				case "plain-error":
					ms[0].Fail(boom)
				case "paused":
					defer ms[0].Pause()()
				case "two-failing":
					ms[0].Fail(boom)
					ms[1].Fail(boom)
				}
				_ = lease.Unlock(context.Background()) // a quorum confirms; the rest is queued
				time.Sleep(time.Second)                // virtual: the failed call has hit its deadline
				synctest.Wait()
				require.Positive(t, c.Stats().Backlog[0], "the failed release is queued for retry")
				returned := make(chan error, 1)
				go func() { returned <- c.Close(context.Background()) }()
				var cerr error
				select {
				case cerr = <-returned:
				case <-time.After(time.Hour): // virtual time: an unbounded Close never returns
					t.Fatal("Close(context.Background()) did not return")
				}
				require.ErrorIs(t, cerr, redlock.ErrNotReleased)
				assert.Contains(t, cerr.Error(), "mem-0")
				assert.NotErrorIs(t, cerr, context.Canceled)
				assert.Equal(t, 0, c.Stats().Backlog[0], "nothing left queued")
			})
		})
	}
}

// A Close whose context has a deadline waits up to it for a node that comes
// back, and then reports nothing abandoned: the release that was queued while
// the master was paused reaches it when it resumes, and no key is left.
func TestCloseWithDeadlineWaitsForAPausedNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c, err := redlock.New(nodes)
		require.NoError(t, err)
		m := newMutex(t, c)
		warmUp(t, m)
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		resume := ms[0].Pause()
		_ = lease.Unlock(context.Background())
		go func() {
			time.Sleep(3 * time.Second)
			resume()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, c.Close(ctx))
		assert.Empty(t, ms[0].Keys(), "the queued release reached the resumed master")
	})
}

// replyError is a server's error reply as a Node returns it: it has the
// RedisError method that marks go-redis's replies.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// An error reply to a release is an answer (TestRefusedReleaseIsNotRetried
// shows it on a real server): the release is not queued, so Close does not
// wait for it until its context ends. So is a denial (ErrNodeDenied: the
// user lacks a permission; retrying cannot help). One that asks to try
// later (LOADING: the server is reading its data back) is not: that
// release is queued and retried until the node answers.
func TestReleaseRetriesOnlyReplyThatAsksToTryLater(t *testing.T) {
	for _, tc := range []struct {
		reply  error
		queued bool
	}{
		{fmt.Errorf("%w: mem-0: NOPERM this user has no permissions to run the 'evalsha' command", redlock.ErrNodeDenied), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{replyError("ERR user_script:1: Script attempted to access a non local key"), false},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("BUSY Redis is busy running a script"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), true},
		{replyError("ERR Error running script (call to f_1a2b): @user_script:1: -READONLY You can't write against a read only replica."), true},
	} {
		t.Run(strings.Join(strings.Fields(tc.reply.Error())[:2], " "), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(3)
				c := newClient(t, nodes)
				m := newMutex(t, c)
				warmUp(t, m)
				lease, err := m.TryLock(context.Background())
				require.NoError(t, err)
				synctest.Wait() // every call of the warm-up and the acquire has landed (they return at a quorum)
				ms[0].Fail(fmt.Errorf("mem-0: %w", tc.reply))
				require.NoError(t, lease.Unlock(context.Background()), "a quorum confirmed")
				synctest.Wait()
				if !tc.queued {
					assert.Equal(t, 0, c.Stats().Backlog[0], "not queued")
					return
				}
				assert.Equal(t, 1, c.Stats().Backlog[0], "queued for a retry")
				ms[0].Fail(nil)
				require.NoError(t, c.Close(context.Background()))
				assert.Zero(t, ownKeys(ms), "the retry released it")
			})
		})
	}
}
