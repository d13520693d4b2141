package redisnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// configs returns the records of epochs 1 and 2 of a set, and of another
// set at epoch 1.
func configs(t *testing.T) (e1, e2, other string) {
	t.Helper()
	c := wire.Config{Epoch: 1, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}
	require.NoError(t, c.Check())
	e1 = c.Record()
	c.Epoch = 2
	e2 = c.Record()
	c.Epoch, c.Masters = 1, []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.4:6379"}
	return e1, e2, c.Record()
}

// TestConfigCheck: every call that counts a vote is checked against the
// master's record in the same step, with the reply the record calls for;
// releases are not checked.
func TestConfigCheck(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	e1, e2, other := configs(t)
	run := serverRun(t, rc)
	setMaster := func(rec string) {
		t.Helper()
		require.NoError(t, rc.HSet(ctx, wire.ConfigKey, "cur", rec, "run", run).Err())
	}

	// Every vote-counting call, with the shapes, fencing and the line.
	calls := map[string]func(key string) error{
		"Acquire": func(key string) error { _, err := n.Acquire(ctx, key, "v", time.Second); return err },
		"Extend":  func(key string) error { _, err := n.Extend(ctx, key, "v", time.Second); return err },
		"AcquireFenced": func(key string) error {
			_, _, err := n.AcquireFenced(ctx, key, "v", time.Second)
			return err
		},
		"RaiseFence": func(key string) error { _, err := n.RaiseFence(ctx, key, "v", 7); return err },
		"AcquireQueued": func(key string) error {
			_, _, err := n.AcquireQueued(ctx, key, "v", time.Second, redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Second})
			return err
		},
		"AcquireHold": func(key string) error {
			_, err := n.AcquireHold(ctx, key, redlock.Hold{Group: "g", ID: "h"}, time.Second)
			return err
		},
		"ExtendHold": func(key string) error {
			_, err := n.ExtendHold(ctx, key, redlock.Hold{Group: "g", ID: "h"}, time.Second)
			return err
		},
	}

	require.NoError(t, n.SetConfig(e1))
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, rc.Del(ctx, wire.ConfigKey).Err())
			err := call(name)
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, "no record: the master's reply as itself")
			assert.Equal(t, "QLCONFIG none", rerr.Error())
			assert.NotErrorIs(t, err, redlock.ErrConfigStale)

			setMaster(e1)
			assert.NoError(t, call(name), "the same record: the call runs")

			// The same record written by another run of the server (a
			// restart from an older snapshot) counts as none.
			require.NoError(t, rc.HSet(ctx, wire.ConfigKey, "run", "0123abcd").Err())
			err = call(name)
			require.ErrorAs(t, err, &rerr, "another run's record")
			assert.Equal(t, "QLCONFIG none", rerr.Error())
			knobs.NoConfigRun.Store(true)
			err = call(name)
			knobs.NoConfigRun.Store(false)
			assert.NoError(t, err, "NoConfigRun trusts it")

			setMaster(e2)
			err = call(name)
			require.ErrorIs(t, err, redlock.ErrConfigStale, "a later epoch on the master")
			assert.ErrorContains(t, err, "QLCONFIG stale "+e2)
			assert.ErrorContains(t, err, srv.Addr(), "the error names the node")

			setMaster(other)
			err = call(name)
			require.ErrorIs(t, err, redlock.ErrConfigStale, "the same epoch, another set")
			assert.ErrorContains(t, err, "QLCONFIG differs "+other)
		})
	}

	// A master behind the client: a failed vote, not a stale client.
	require.NoError(t, n.SetConfig(e2))
	setMaster(e1)
	_, err := n.Acquire(ctx, "behind", "v", time.Second)
	assert.ErrorContains(t, err, "QLCONFIG behind "+e1)
	assert.NotErrorIs(t, err, redlock.ErrConfigStale)
	assert.Zero(t, rc.Exists(ctx, "behind").Val(), "a refused call changes nothing")

	// Releases are never checked: a stale client removes its own keys.
	require.NoError(t, n.SetConfig(""))
	ok, err := n.Acquire(ctx, "mine", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "without a record nothing is checked")
	require.NoError(t, n.SetConfig(e2))
	setMaster(e2)
	require.NoError(t, n.SetConfig(e1))
	ok, err = n.Release(ctx, "mine", "v", time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "a stale client's release deletes its key")

	// The switch that turns the check off sends the calls unchecked.
	knobs.NoConfigCheck.Store(true)
	ok, err = n.Acquire(ctx, "unchecked", "v", time.Second)
	knobs.NoConfigCheck.Store(false)
	require.NoError(t, err)
	assert.True(t, ok, "NoConfigCheck: a stale client takes the key")
}

// serverRun is the server's run as the configuration record holds it: its
// run_id (internal/redisinfo reads it).
func serverRun(t *testing.T, rc *redis.Client) string {
	t.Helper()
	s, err := rc.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	si, err := redisinfo.Parse(rc.Options().Addr, s)
	require.NoError(t, err)
	return si.RunID
}

// TestConfigBoundsTheKeyTTL: a key TTL above the record's longest key life
// is refused before it is sent, and Lock stops at once.
func TestConfigBoundsTheKeyTTL(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	e1, _, _ := configs(t) // longest key life: one minute
	require.NoError(t, rc.HSet(ctx, wire.ConfigKey, "cur", e1, "run", serverRun(t, rc)).Err())
	require.NoError(t, n.SetConfig(e1))
	_, err := n.Acquire(ctx, "long", "v", 2*time.Minute)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	require.ErrorIs(t, err, redlock.ErrNotSent)
	assert.ErrorContains(t, err, "2m0s")
	assert.ErrorContains(t, err, "1m0s")
	ok, err := n.Acquire(ctx, "short", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)

	c, err := redlock.New([]redlock.Node{n}, redlock.WithQuorum(1))
	require.NoError(t, err)
	defer c.Close(context.Background())
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := c.NewMutex("lock", redlock.WithTTL(2*time.Minute))
	require.NoError(t, err)
	_, err = m.Lock(lctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	assert.NoError(t, lctx.Err(), "Lock stopped at once, not at its deadline")
}

// TestSetConfigRefuses: a malformed record and a Cluster client are
// refused, and the node keeps its record.
func TestSetConfigRefuses(t *testing.T) {
	n, err := Dial("127.0.0.1:1")
	require.NoError(t, err)
	defer n.Close()
	e1, _, _ := configs(t)
	require.NoError(t, n.SetConfig(e1))
	for _, bad := range []string{"1 single 60000", "x single 60000 0123456789abcdef01234567", "1 triple 60000 0123456789abcdef01234567", "1 removed 60000 0123456789abcdef01234567", "1 single 0 0123456789abcdef01234567"} {
		err := n.SetConfig(bad)
		require.Error(t, err, bad)
		assert.ErrorContains(t, err, "configuration record")
	}
	assert.Equal(t, e1, n.config.Load().record, "a refused record leaves the last one")

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	defer cc.Close()
	cn, err := New(cc)
	require.NoError(t, err)
	err = cn.SetConfig(e1)
	require.Error(t, err)
	assert.ErrorContains(t, err, "Cluster")
}

// aclConfig is what a client with a record needs on top of the minimal ACL
// (docs/operations.md, "Replacing a master"; keep the two in step).
const aclConfig = "~quorumlock:config +hmget"

// TestConfigCheckWithTheMinimalACL: the minimal ACL and aclConfig run a
// checked acquire, extend and release; without either grant the check is
// denied, naming what was refused.
func TestConfigCheckWithTheMinimalACL(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	require.NoError(t, setup.Do(ctx, "ACL", "SETUSER", "admin", "on", ">adminpw", "~*", "&*", "+@all").Err())
	admin := adminT(t, &redis.Options{Addr: srv.Addr(), Username: "admin", Password: "adminpw"})
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "default", "off").Err())
	e1, _, _ := configs(t)
	require.NoError(t, admin.HSet(ctx, wire.ConfigKey, "cur", e1, "run", serverRun(t, admin)).Err())
	for _, tc := range []struct {
		user, acl, refused string
	}{
		{"checked", aclLocker + " " + aclConfig, ""},
		{"nokey", aclLocker + " +hmget", "refused a key"},
		{"nohmget", aclLocker + " ~quorumlock:config", "refused HMGET (config_check.lua+acquire.lua line "},
	} {
		t.Run(tc.user, func(t *testing.T) {
			require.NoError(t, admin.Do(ctx, append([]any{"ACL", "SETUSER", tc.user}, fields(tc.acl)...)...).Err())
			n := dialT(t, "redis://"+tc.user+":pw@"+srv.Addr())
			require.NoError(t, n.SetConfig(e1))
			ok, err := n.Acquire(ctx, "locks:"+tc.user, "v", time.Second)
			if tc.refused != "" {
				require.ErrorIs(t, err, redlock.ErrNodeDenied)
				assert.Contains(t, err.Error(), tc.refused)
				return
			}
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = n.Extend(ctx, "locks:"+tc.user, "v", time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = n.Release(ctx, "locks:"+tc.user, "v", time.Second)
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

// TestFenceEpochStamp: a client with a record at epoch f stamps the
// counters it raises with f, and its fenced and queued acquires read a
// counter stamped f or f-1 as present and one stamped f-2 or earlier (an
// unstamped one is epoch 0) as lost; knobs.NoConfigStamp reads them all.
func TestFenceEpochStamp(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	c := wire.Config{Epoch: 3, Masters: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, Quorum: 2, MaxKeyTTL: time.Minute, DriftFactor: 0.01}
	require.NoError(t, rc.HSet(ctx, wire.ConfigKey, "cur", c.Record(), "run", serverRun(t, rc)).Err())
	require.NoError(t, n.SetConfig(c.Record()))
	info, err := rc.Info(ctx, "replication").Result()
	require.NoError(t, err)
	_, replid, _ := strings.Cut(info, "master_replid:")
	replid, _, _ = strings.Cut(replid, "\r\n")
	run := serverRun(t, rc) + replid // the fencing counters' run

	ok, err := n.Acquire(ctx, "raised", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = n.RaiseFence(ctx, "raised", "v", 42)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "42:"+run+":3", rc.Get(ctx, wire.FenceKey("raised")).Val(), "stamped with the client's epoch")

	acquires := map[string]func(key string) (int64, error){
		"AcquireFenced": func(key string) (int64, error) {
			_, f, err := n.AcquireFenced(ctx, key, "v", time.Second)
			return f, err
		},
		"AcquireQueued": func(key string) (int64, error) {
			_, f, err := n.AcquireQueued(ctx, key, "v", time.Second, redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Second})
			return f, err
		},
	}
	for name, acquire := range acquires {
		t.Run(name, func(t *testing.T) {
			for i, tc := range []struct {
				counter string
				want    int64
				off     int64 // with knobs.NoConfigStamp
			}{
				{"7:" + run + ":3", 7, 7},
				{"7:" + run + ":2", 7, 7},
				{"7:" + run + ":1", 0, 7},
				{"7:" + run, 0, 7},
				{"7:ab:3", 0, 0}, // another run's: lost either way
			} {
				for _, off := range []bool{false, true} {
					key := fmt.Sprintf("%s%d%v", name, i, off)
					require.NoError(t, rc.Set(ctx, wire.FenceKey(key), tc.counter, 0).Err())
					knobs.NoConfigStamp.Store(off)
					got, err := acquire(key)
					knobs.NoConfigStamp.Store(false)
					require.NoError(t, err)
					want := tc.want
					if off {
						want = tc.off
					}
					assert.Equal(t, want, got, "counter %q, NoConfigStamp %v", tc.counter, off)
				}
			}
		})
	}
}
