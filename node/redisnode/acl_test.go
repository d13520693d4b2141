package redisnode

import (
	"context"
	"errors"
	"fmt"
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

	// A denial wraps redlock.ErrNodeDenied, names the node and what was
	// refused, and keeps the reply in the chain.
	isDenied := func(what, prefix, refused string, err error) {
		t.Helper()
		var rerr redis.Error
		require.True(t, errors.As(err, &rerr), "%s: %v", what, err)
		assert.True(t, strings.HasPrefix(rerr.Error(), prefix), "%s: %v", what, rerr)
		assert.ErrorIs(t, err, redlock.ErrNodeDenied, what)
		assert.True(t, strings.HasPrefix(err.Error(), "redlock: node denied access: "+srv.Addr()+": refused "+refused), "%s: %v", what, err)
		assert.True(t, strings.HasSuffix(err.Error(), ": "+rerr.Error()), "%s: %v", what, err)
		t.Logf("%s: %v", what, err)
	}
	// A name outside the key pattern.
	_, err = n.Acquire(ctx, "other", "v", time.Minute)
	isDenied("key outside the pattern", "NOPERM ", `a key, one of "other", "{other}:release-guard:`, err)

	// A user without EVALSHA and EVAL: NOPERM.
	nv := dialT(t, "redis://noeval:pw@"+srv.Addr())
	_, err = nv.Extend(ctx, "locks:d", "v", time.Minute)
	isDenied("Extend without EVALSHA", "NOPERM ", "EVALSHA: ", err)

	// A user without PEXPIRE: the script's PEXPIRE is refused. Redis 7.0
	// answers "ERR The user executing the script can't run this command or
	// subcommand script: <sha1>, on @user_script:<line>." (not NOPERM) for
	// a command refused inside a script; it is a denial too, and the error
	// names the command of that line of the script.
	ne := dialT(t, "redis://noexpire:pw@"+srv.Addr())
	ok, err = ne.Acquire(ctx, "locks:d", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = ne.Extend(ctx, "locks:d", "v", time.Minute)
	isDenied("Extend without PEXPIRE", "ERR The user executing the script can't run this command", "PEXPIRE (extend.lua line ", err)
	assert.NotErrorIs(t, err, redlock.ErrNotSent, "refused inside the script: it may have written before")

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

// Issue 32, item 7: of 16 ACL users each missing one grant, 13 got an error
// that did not say what was refused. Each user here lacks one grant of the
// minimal ACL of docs/nodes.md (aclLocker: a command, or a key pattern) and
// runs what a lock does (Info, acquire through EVAL after a SCRIPT FLUSH,
// acquire of a held key, extend, release, release leaving a guard): its
// first error wraps redlock.ErrNodeDenied and names the node and what the
// server refused (the command, inside which script; or the keys), never the
// password.
func TestACLMissingOneGrantNamesTheRefusal(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	require.NoError(t, setup.Do(ctx, "ACL", "SETUSER", "admin", "on", ">adminpw", "~*", "&*", "+@all").Err())
	admin := adminT(t, &redis.Options{Addr: srv.Addr(), Username: "admin", Password: "adminpw"})
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "off").Err())

	grants := strings.Fields(aclLocker)
	var missing []string
	for _, g := range grants {
		if strings.HasPrefix(g, "+") || strings.HasPrefix(g, "~") {
			missing = append(missing, g)
		}
	}
	require.Len(t, missing, 10, "8 commands and 2 key patterns in %q", aclLocker)
	// What the error must name for each missing grant: the command (after
	// "refused "), with the script it ran in, or the key refused.
	want := map[string]string{
		"+evalsha": "refused EVALSHA: ", "+eval": "refused EVAL: ", "+info": "refused INFO: ",
		"+get": "refused GET (acquire.lua line ", "+set": "refused SET (acquire.lua line ",
		"+del": "refused DEL (release.lua line ", "+exists": "refused EXISTS (acquire.lua line ",
		"+pexpire": "refused PEXPIRE (extend.lua line ",
		"~locks:*": `refused a key, one of "locks:a", `, "~{locks:*": `"{locks:a}:release-guard:`,
	}
	for i, g := range missing {
		t.Run(g, func(t *testing.T) {
			user := fmt.Sprintf("without%d", i)
			var rest []any
			for _, f := range grants {
				if f == g {
					continue
				}
				if f == ">pw" {
					f = ">pw-" + secret
				}
				rest = append(rest, f)
			}
			require.NoError(t, admin.Do(ctx, append([]any{"ACL", "SETUSER", user}, rest...)...).Err())
			require.NoError(t, admin.FlushAll(ctx).Err())
			require.NoError(t, admin.ScriptFlush(ctx).Err()) // EVALSHA misses: EVAL loads the script
			n := dialT(t, "redis://"+user+":pw-"+secret+"@"+srv.Addr())
			steps := []struct {
				name string
				run  func() error
			}{
				{"Info", func() error { _, err := n.Info(ctx); return err }},
				{"Acquire", func() error { _, err := n.Acquire(ctx, "locks:a", "v", time.Minute); return err }},
				{"Acquire held", func() error { _, err := n.Acquire(ctx, "locks:a", "other", time.Minute); return err }},
				{"Extend", func() error { _, err := n.Extend(ctx, "locks:a", "v", time.Minute); return err }},
				{"Release", func() error { _, err := n.Release(ctx, "locks:a", "v", time.Minute); return err }},
				{"Release with guard", func() error { _, err := n.Release(ctx, "locks:b", "v", time.Minute); return err }},
			}
			var err error
			step := ""
			for _, s := range steps {
				if err = s.run(); err != nil {
					step = s.name
					break
				}
			}
			require.Error(t, err, "a user without %s did everything", g)
			t.Logf("without %s, %s: %v", g, step, err)
			assert.ErrorIs(t, err, redlock.ErrNodeDenied)
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, "the reply stays in the chain")
			assert.True(t, strings.HasPrefix(err.Error(), "redlock: node denied access: "+srv.Addr()+": refused "), err.Error())
			assert.Contains(t, err.Error(), want[g])
			assert.NotContains(t, err.Error(), secret)
		})
	}

	// The lock shapes' scripts need 8 more commands (docs/nodes.md): a
	// user with the minimal ACL and 7 of them is told which one it lacks.
	for _, cmd := range strings.Fields(aclShapes) {
		t.Run("shapes "+cmd, func(t *testing.T) {
			user := "shapes-without-" + cmd[1:]
			acl := strings.Replace(aclLocker+" "+aclShapes, " "+cmd, "", 1)
			require.NoError(t, admin.Do(ctx, append([]any{"ACL", "SETUSER", user}, fields(acl)...)...).Err())
			require.NoError(t, admin.FlushAll(ctx).Err())
			n := dialT(t, "redis://"+user+":pw@"+srv.Addr())
			h := redlock.Hold{Group: "s:2", ID: "a", Limit: 2}
			_, err := n.AcquireHold(ctx, "locks:s", h, time.Minute)
			if err == nil {
				_, err = n.ReleaseHold(ctx, "locks:s", h, time.Minute)
			}
			require.Error(t, err, "a user without %s did everything", cmd)
			t.Logf("without %s: %v", cmd, err)
			assert.ErrorIs(t, err, redlock.ErrNodeDenied)
			assert.Contains(t, err.Error(), "redlock: node denied access: "+srv.Addr()+": refused ")
			assert.Regexp(t, `refused (\w+ or )*`+strings.ToUpper(cmd[1:])+`( or \w+)* \(\w+_hold\.lua line [0-9]+\): ERR `, err.Error())
		})
	}
}

// aclShapes is what the lock shapes need on top of aclLocker (docs/nodes.md).
const aclShapes = "+time +zadd +zrem +zrange +zremrangebyscore +zscore +zcard +pexpireat"
