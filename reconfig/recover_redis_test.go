package reconfig_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// tryLock makes one attempt at key.
func tryLock(t *testing.T, c *redlock.Client, key string) (*redlock.Lease, error) {
	t.Helper()
	m, err := c.NewMutex(key, redlock.WithTTL(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.TryLock(ctx)
}

// TestRecoverAfterTheFleetRestarts: every master restarts (with its AOF:
// the records survive, of another run; without persistence: gone). A
// checked client then gets no vote anywhere, Repair is refused (no quorum
// holds the record), and Recover writes the same set at the next epoch:
// the client is refused as stale, reloads the published file, and locks.
func TestRecoverAfterTheFleetRestarts(t *testing.T) {
	for _, aof := range []bool{true, false} {
		t.Run(map[bool]string{true: "records kept", false: "records lost"}[aof], func(t *testing.T) {
			r := newRig(t, redisproc.Config{AppendOnly: aof})
			ctx := context.Background()
			file := filepath.Join(t.TempDir(), "masters.conf")
			e1 := config(t, 1, r.addrs[:3], time.Second)
			require.NoError(t, r.ch.Init(ctx, e1))
			require.NoError(t, reconfig.WriteFile(file, e1))
			clients, err := reconfig.NewClients(ctx, reconfig.FileSource(file), nil)
			require.NoError(t, err)
			defer clients.Close(context.Background())
			c1, _ := clients.Client()
			lease, err := tryLock(t, c1, "before")
			require.NoError(t, err)
			require.NoError(t, lease.Unlock(ctx))

			for _, s := range r.servers[:3] {
				require.NoError(t, s.Restart())
			}
			_, err = tryLock(t, c1, "after")
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			assert.ErrorContains(t, err, "QLCONFIG none", "no master votes")
			assert.NotErrorIs(t, err, redlock.ErrConfigStale)
			require.ErrorIs(t, r.ch.Repair(ctx, e1), reconfig.ErrRefused, "no quorum holds it")

			e2, err := r.ch.Recover(ctx, e1)
			require.NoError(t, err)
			assert.Equal(t, int64(2), e2.Epoch)
			assert.Equal(t, e1.Masters, e2.Masters, "the same set")
			require.NoError(t, reconfig.WriteFile(file, e2))
			_, err = tryLock(t, c1, "after")
			require.ErrorIs(t, err, redlock.ErrConfigStale, "the old epoch is refused as stale: the client reloads")
			c2, err := clients.Reload(ctx)
			require.NoError(t, err)
			lease, err = tryLock(t, c2, "after")
			require.NoError(t, err, "the reloaded client locks")
			require.NoError(t, lease.Unlock(ctx))
			for _, m := range e2.Masters {
				rec, err := r.ch.Read(ctx, m)
				require.NoError(t, err)
				assert.Equal(t, e2.Record(), rec.Config.Record())
				assert.False(t, rec.Sealed.IsZero(), "sealed: the next step waits from now")
			}

			// Once done, it is refused (a quorum holds epoch 2: repair);
			// from the old file it writes epoch 2 again, not 3.
			_, err = r.ch.Recover(ctx, e2)
			require.ErrorIs(t, err, reconfig.ErrRefused)
			assert.ErrorContains(t, err, "run repair")
			again, err := r.ch.Recover(ctx, e1)
			require.NoError(t, err)
			assert.Equal(t, e2.Record(), again.Record())
		})
	}
}

// TestRecoverRefuses: Recover writes nothing when the file is not the
// masters' last configuration (a master holds a later epoch for another
// set, or another configuration of the file's epoch), or when a master of
// it cannot be read.
func TestRecoverRefuses(t *testing.T) {
	r := newRig(t, redisproc.Config{AppendOnly: true})
	ctx := context.Background()
	m := r.addrs
	e1 := config(t, 1, m[:3], 200*time.Millisecond)
	require.NoError(t, r.ch.Init(ctx, e1))
	e2, err := reconfig.Next(e1, m[:4])
	require.NoError(t, err)
	r.waitUnsealed(t, e1)
	require.NoError(t, r.ch.Step(ctx, e1, e2))
	for _, s := range r.servers[:4] {
		require.NoError(t, s.Restart())
	}
	_, err = r.ch.Recover(ctx, e1)
	require.ErrorIs(t, err, reconfig.ErrRefused, "a stale file")
	assert.ErrorContains(t, err, "the newest configuration the masters recorded is epoch 2 (4 masters")

	other := config(t, 2, []string{m[0], m[1], m[4]}, 200*time.Millisecond)
	_, err = r.ch.Recover(ctx, other)
	require.ErrorIs(t, err, reconfig.ErrRefused, "another configuration of epoch 2")
	assert.ErrorContains(t, err, "not epoch 2 of these (3 masters, quorum 2)")

	require.NoError(t, r.servers[3].Stop())
	_, err = r.ch.Recover(ctx, e2)
	require.ErrorIs(t, err, reconfig.ErrRefused, "a master not read")
	assert.ErrorContains(t, err, "may hold a later record")
	for _, a := range m[:3] {
		rec, err := r.ch.Read(ctx, a)
		require.NoError(t, err)
		assert.Equal(t, e2.Record(), rec.Config.Record(), "nothing written")
		assert.True(t, rec.Lost)
	}
}

// TestOneServerUnderTwoAddresses: Init, Step and Recover refuse a set
// that names one server twice (its run_id): it would vote twice.
func TestOneServerUnderTwoAddresses(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	alias := "localhost:" + r.addrs[0][len("127.0.0.1:"):]
	c := redis.NewClient(&redis.Options{Addr: alias, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	r.ch.Masters[alias] = c
	twice := config(t, 1, []string{r.addrs[0], alias, r.addrs[1]}, time.Second)
	err := r.ch.Init(ctx, twice)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "are one server")
	rec, err := r.ch.Read(ctx, r.addrs[1])
	require.NoError(t, err)
	assert.Zero(t, rec.Config.Epoch, "nothing written")

	e1 := config(t, 1, r.addrs[:3], time.Second)
	require.NoError(t, r.ch.Init(ctx, e1))
	e2, err := reconfig.Next(e1, append(append([]string(nil), r.addrs[:3]...), alias))
	require.NoError(t, err)
	err = r.ch.Step(ctx, e1, e2)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "are one server")
	_, err = r.ch.Recover(ctx, twice)
	assert.ErrorContains(t, err, "are one server")
}

// TestKeySource: a configuration published at a key (WriteKey) is what
// KeySource reads; the key never goes back to an older epoch nor takes
// another configuration of its epoch; Clients on a KeySource reload what
// is published there.
func TestKeySource(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	store := r.admin[r.addrs[5]] // the Redis the clients share
	const key = "ops:quorumlock:masters"
	src := reconfig.KeySource(store, key)
	_, err := src(ctx)
	require.ErrorContains(t, err, "holds no configuration")

	e1 := config(t, 1, r.addrs[:3], time.Second)
	require.NoError(t, r.ch.Init(ctx, e1))
	require.NoError(t, reconfig.WriteKey(ctx, store, key, e1))
	got, err := src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e1.Record(), got.Record())
	clients, err := reconfig.NewClients(ctx, src, nil)
	require.NoError(t, err)
	defer clients.Close(context.Background())

	e2, err := reconfig.Next(e1, r.addrs[:4])
	require.NoError(t, err)
	r.waitUnsealed(t, e1)
	require.NoError(t, r.ch.Step(ctx, e1, e2))
	require.NoError(t, reconfig.WriteKey(ctx, store, key, e2))
	require.NoError(t, reconfig.WriteKey(ctx, store, key, e2), "the same again")
	err = reconfig.WriteKey(ctx, store, key, e1)
	require.ErrorIs(t, err, reconfig.ErrRefused, "an older epoch")
	assert.ErrorContains(t, err, "newer 2")
	other := config(t, 2, []string{r.addrs[0], r.addrs[1], r.addrs[4]}, time.Second)
	require.ErrorIs(t, reconfig.WriteKey(ctx, store, key, other), reconfig.ErrRefused, "another configuration of epoch 2")
	got, err = src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e2.Record(), got.Record(), "unchanged by the refusals")

	c2, err := clients.Reload(ctx)
	require.NoError(t, err)
	lease, err := tryLock(t, c2, "job")
	require.NoError(t, err, "the client of the published epoch locks")
	require.NoError(t, lease.Unlock(ctx))

	reordered := e2
	reordered.Masters = []string{e2.Masters[3], e2.Masters[0], e2.Masters[2], e2.Masters[1]}
	require.NoError(t, reconfig.WriteKey(ctx, store, key, reordered), "the same configuration, its masters in another order")

	require.NoError(t, store.Set(ctx, key, "epoch x", 0).Err())
	_, err = src(ctx)
	require.ErrorContains(t, err, key)
	require.NoError(t, store.Set(ctx, key, "epoch 99999999999999999999\n", 0).Err())
	require.NoError(t, reconfig.WriteKey(ctx, store, key, e2), "junk no client can read is written over")
	got, err = src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e2.Record(), got.Record())
}

// TestInitAgain: an init that a master does not answer writes nothing;
// once that master is back, init again writes it everywhere and seals it.
func TestInitAgain(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	e1 := config(t, 1, r.addrs[:3], time.Second)
	require.NoError(t, r.servers[2].Kill())
	err := r.ch.Init(ctx, e1)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "nothing written")
	rec, err := r.ch.Read(ctx, r.addrs[0])
	require.NoError(t, err)
	assert.Zero(t, rec.Config.Epoch)
	require.NoError(t, r.servers[2].Restart())
	require.NoError(t, r.ch.Init(ctx, e1))
	for _, m := range e1.Masters {
		rec, err := r.ch.Read(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, e1.Record(), rec.Config.Record(), m)
		assert.False(t, rec.Sealed.IsZero(), m)
	}
}

// TestRecoverRefusesAnEditedFile: a configuration that is not the one the
// masters recorded is refused, whether the masters are healthy (their
// configuration is live: a quorum holds it under their current runs) or
// all restarted (their records, lost, still say which set they were).
func TestRecoverRefusesAnEditedFile(t *testing.T) {
	r := newRig(t, redisproc.Config{AppendOnly: true})
	ctx := context.Background()
	m := r.addrs
	e1 := config(t, 1, m[:3], time.Second)
	require.NoError(t, r.ch.Init(ctx, e1))
	edited := config(t, 2, []string{m[0], m[3], m[4]}, time.Second) // two masters swapped at once
	_, err := r.ch.Recover(ctx, edited)
	require.ErrorIs(t, err, reconfig.ErrRefused, "healthy masters")
	assert.ErrorContains(t, err, "that configuration is not lost")
	for _, s := range r.servers[:3] {
		require.NoError(t, s.Restart())
	}
	_, err = r.ch.Recover(ctx, edited)
	require.ErrorIs(t, err, reconfig.ErrRefused, "restarted masters")
	assert.ErrorContains(t, err, "the newest configuration the masters recorded is epoch 1 (3 masters")
	for _, a := range m[3:5] {
		rec, err := r.ch.Read(ctx, a)
		require.NoError(t, err)
		assert.Zero(t, rec.Config.Epoch, "nothing written on %s", a)
	}
	got, err := r.ch.Recover(ctx, e1)
	require.NoError(t, err, "the configuration the masters recorded")
	assert.Equal(t, int64(2), got.Epoch)
}

// TestInitAfterAMistake: an init naming a master that does not answer
// writes nothing; one that a master refused part way (the others took it,
// unsealed) can be replaced by a corrected init.
func TestInitAfterAMistake(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	m := r.addrs
	typo := "127.0.0.1:1" // nobody listens
	tc := redis.NewClient(&redis.Options{Addr: typo, ContextTimeoutEnabled: true, DialTimeout: 200 * time.Millisecond, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = tc.Close() })
	r.ch.Masters[typo] = tc
	err := r.ch.Init(ctx, config(t, 1, []string{m[0], m[1], m[2], typo}, time.Second))
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "nothing written")
	for _, a := range m[:3] {
		rec, err := r.ch.Read(ctx, a)
		require.NoError(t, err)
		assert.Zero(t, rec.Config.Epoch, "nothing written on %s", a)
	}

	// A master that refuses (it holds another record of its own) after
	// the others took the first one: they keep it, unsealed.
	other := config(t, 1, []string{m[3], m[4], m[5]}, time.Second)
	require.NoError(t, r.ch.Init(ctx, other))
	wrong := config(t, 1, []string{m[0], m[1], m[3]}, time.Second)
	require.ErrorIs(t, r.ch.Init(ctx, wrong), reconfig.ErrRefused)
	rec, err := r.ch.Read(ctx, m[0])
	require.NoError(t, err)
	require.Equal(t, wrong.Record(), rec.Config.Record(), "the failed init's record, unsealed")
	require.True(t, rec.Sealed.IsZero())
	right := config(t, 1, m[:3], time.Second)
	require.NoError(t, r.ch.Init(ctx, right), "the corrected init replaces it")
	for _, a := range m[:3] {
		rec, err := r.ch.Read(ctx, a)
		require.NoError(t, err)
		assert.Equal(t, right.Record(), rec.Config.Record(), a)
		assert.False(t, rec.Sealed.IsZero(), a)
	}
	rec, err = r.ch.Read(ctx, m[3])
	require.NoError(t, err)
	assert.Equal(t, other.Record(), rec.Config.Record(), "a sealed first record stays")
}

// TestRepairRefusesANewerRecord: a master of the configuration that holds
// a later record of its current run (another operator's change) is left
// alone, and Repair fails, naming it, instead of reporting the masters
// repaired.
func TestRepairRefusesANewerRecord(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	m := r.addrs
	e1 := config(t, 1, m[:4], time.Second)
	require.NoError(t, r.ch.Init(ctx, e1))
	info, err := r.admin[m[3]].Info(ctx, "server").Result()
	require.NoError(t, err)
	si, err := redisinfo.Parse(m[3], info)
	require.NoError(t, err)
	later := config(t, 3, m[:5], time.Second)
	require.NoError(t, r.admin[m[3]].HSet(ctx, "quorumlock:config", "cur", later.Record(), "members", later.Text(), "run", si.RunID).Err())
	err = r.ch.Repair(ctx, e1)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, m[3]+" holds a newer record")
	rec, err := r.ch.Read(ctx, m[3])
	require.NoError(t, err)
	assert.Equal(t, later.Record(), rec.Config.Record(), "left alone")
}
