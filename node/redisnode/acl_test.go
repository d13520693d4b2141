package redisnode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

// aclLocker is the minimal ACL of docs/nodes.md for lock names starting with
// "locks:" (keep the two in step).
const aclLocker = "on >pw resetchannels ~locks:* ~{locks:* -@all +evalsha +eval +info +get +set +del +exists +pexpire"

func TestMinimalACL(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	for _, cmd := range [][]any{
		append([]any{"ACL", "SETUSER", "locker"}, fields(aclLocker)...),
		append([]any{"ACL", "SETUSER", "noexpire"}, fields(strings.Replace(aclLocker, " +pexpire", "", 1))...),
		append([]any{"ACL", "SETUSER", "noeval"}, fields(strings.Replace(aclLocker, " +evalsha +eval", "", 1))...),
		{"ACL", "SETUSER", "admin", "on", ">adminpw", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "default", "off"},
	} {
		require.NoError(t, setup.Do(ctx, cmd...).Err(), cmd)
	}
	admin := adminT(t, &redis.Options{Addr: srv.Addr(), Username: "admin", Password: "adminpw"})

	n := dialT(t, "redis://locker:pw@"+srv.Addr())
	ok, err := n.Acquire(ctx, "locks:a", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = n.Extend(ctx, "locks:a", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = n.Release(ctx, "locks:a", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = n.Release(ctx, "locks:b", "late", time.Minute) // leaves a guard {locks:b}:...
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = n.Acquire(ctx, "locks:b", "late", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "refused by the guard")
	ok, err = n.Acquire(ctx, "locks:{t}:c", "v", time.Minute) // a hash-tagged name
	require.NoError(t, err)
	assert.True(t, ok)
	si, err := n.Info(ctx)
	require.NoError(t, err)
	assert.Len(t, si.RunID, 40)
	assert.Equal(t, int64(2), admin.DBSize(ctx).Val(), "the guard of locks:b and the lock locks:{t}:c")

	// A script is loaded with EVAL once and run by EVALSHA afterwards; both
	// paths work after a flush.
	require.NoError(t, admin.ScriptFlush(ctx).Err())
	ok, err = n.Extend(ctx, "locks:{t}:c", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)

	isReply := func(what, prefix string, err error) {
		t.Helper()
		var rerr redis.Error
		require.True(t, errors.As(err, &rerr), "%s: %v", what, err)
		assert.Equal(t, any(rerr), any(err), "%s: unwrapped", what)
		assert.True(t, strings.HasPrefix(err.Error(), prefix), "%s: %v", what, err)
		assert.NotErrorIs(t, err, redlock.ErrNodeDenied, what)
		t.Logf("%s: %v", what, err)
	}
	// A denial wraps redlock.ErrNodeDenied, names the node, and keeps the
	// reply in the chain.
	isNoPerm := func(what string, err error) {
		t.Helper()
		var rerr redis.Error
		require.True(t, errors.As(err, &rerr), "%s: %v", what, err)
		assert.True(t, strings.HasPrefix(rerr.Error(), "NOPERM "), "%s: %v", what, rerr)
		assert.ErrorIs(t, err, redlock.ErrNodeDenied, what)
		assert.Equal(t, "redlock: node denied access: "+srv.Addr()+": "+rerr.Error(), err.Error(), what)
		t.Logf("%s: %v", what, err)
	}
	// A name outside the key pattern.
	_, err = n.Acquire(ctx, "other", "v", time.Minute)
	isNoPerm("key outside the pattern", err)

	// A user without EVALSHA and EVAL: NOPERM.
	nv := dialT(t, "redis://noeval:pw@"+srv.Addr())
	_, err = nv.Extend(ctx, "locks:d", "v", time.Minute)
	isNoPerm("Extend without EVALSHA", err)

	// A user without PEXPIRE: the script's PEXPIRE is refused. Redis 7.0
	// answers "ERR The user executing the script can't run this command or
	// subcommand script: ..." (not NOPERM) for a command refused inside a
	// script; it comes back as that reply, unchanged.
	ne := dialT(t, "redis://noexpire:pw@"+srv.Addr())
	ok, err = ne.Acquire(ctx, "locks:d", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = ne.Extend(ctx, "locks:d", "v", time.Minute)
	isReply("Extend without PEXPIRE", "ERR The user executing the script can't run this command", err)

	// The default user is off; a wrong password is refused without showing it.
	for _, addr := range []string{srv.Addr(), "redis://locker:wrong-" + secret + "@" + srv.Addr()} {
		d := dialT(t, addr)
		_, err = d.Acquire(ctx, "locks:e", "v", time.Minute)
		require.Error(t, err, addr)
		assert.NotContains(t, err.Error(), secret)
		assert.ErrorIs(t, err, redlock.ErrNodeDenied, addr)
		assert.Contains(t, err.Error(), srv.Addr(), "names the node")
		t.Logf("%s: %v", shownAddr(addr), err)
	}
}

func fields(s string) []any {
	var out []any
	for _, f := range strings.Fields(s) {
		out = append(out, f)
	}
	return out
}
