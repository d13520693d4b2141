package redisguard_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/fence/redisguard"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

func clientT(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: server.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// flushT empties the shared server: no keys or marks from an earlier test
// (or an earlier run of this one, with -count).
func flushT(t *testing.T) {
	t.Helper()
	if err := clientT(t).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSet: one writer after another on a real redis-server. A new key takes
// any token, an equal token is accepted, a lower one refused naming both and
// leaving the key as it was; the mark is the key's "{key}:fence-mark"; a
// token below 1 and a key that cannot share its mark's slot are refused
// before the server is asked; a mark that holds no token fails the script.
func TestSet(t *testing.T) {
	flushT(t)
	ctx := t.Context()
	c := clientT(t)
	for i, tok := range []fence.Token{5, 5, 7} {
		if err := redisguard.Set(ctx, c, "totals:42", tok, fmt.Sprint("v", i)); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := redisguard.Set(ctx, c, "totals:42", 6, "stale")
	var stale *fence.StaleError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) || stale.Token != 6 || stale.Highest != 7 || stale.Resource != "totals:42" {
		t.Fatalf("token 6 after 7: %v", err)
	}
	if v := c.Get(ctx, "totals:42").Val(); v != "v2" {
		t.Errorf("value %q, want v2", v)
	}
	if m := c.Get(ctx, "{totals:42}:fence-mark").Val(); m != "7" {
		t.Errorf("mark %q, want 7", m)
	}
	for _, tok := range []fence.Token{0, -1} {
		if err := redisguard.Set(ctx, c, "totals:42", tok, "x"); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("token %d: %v", tok, err)
		}
	}
	for _, key := range []string{"a}b", "a{}b", "x{}y{z}"} {
		if err := redisguard.Set(ctx, c, key, 1, "x"); !errors.Is(err, redisguard.ErrKey) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	c.Set(ctx, "{broken}:fence-mark", "not a token", 0)
	if err := redisguard.Set(ctx, c, "broken", 9, "x"); err == nil || !strings.Contains(err.Error(), "holds no token") || c.Exists(ctx, "broken").Val() != 0 {
		t.Errorf("a mark with no token: %v", err)
	}
	c.Set(ctx, "wrongtype", "x", 0)
	c.HSet(ctx, "{wrongtype}:fence-mark", "f", "v")
	if err := redisguard.Set(ctx, c, "wrongtype", 9, "x"); err == nil || !strings.Contains(err.Error(), `redisguard: set "wrongtype" with token 9: `) {
		t.Errorf("a mark of the wrong type: %v", err)
	}
}

// TestSetComparesEveryInt64: tokens are compared exactly up to 2^63-1,
// where Lua's numbers (doubles) would call 2^53 and 2^53+1 equal, and
// across lengths.
func TestSetComparesEveryInt64(t *testing.T) {
	flushT(t)
	ctx := t.Context()
	c := clientT(t)
	for _, p := range [][2]fence.Token{
		{1 << 53, 1<<53 + 1},
		{9223372036854775806, 9223372036854775807},
		{9, 10},
		{99, 100},
		{1795598639662539, 1795598639662540},
	} {
		key := fmt.Sprint("big:", p[0])
		if err := redisguard.Set(ctx, c, key, p[1], "high"); err != nil {
			t.Fatal(err)
		}
		var stale *fence.StaleError
		if err := redisguard.Set(ctx, c, key, p[0], "low"); !errors.As(err, &stale) || stale.Highest != p[1] {
			t.Errorf("%d after %d: %v", p[0], p[1], err)
		}
		if err := redisguard.Set(ctx, c, key, p[1], "again"); err != nil {
			t.Errorf("%d again: %v", p[1], err)
		}
	}
}

// TestSetConcurrentWriters: 8 writers, each with a client of its own, race
// on one key with the tokens 1..400 dealt round the writers (each one's
// tokens grow, neighbours race), each writing its token as the value. A
// reader meanwhile always sees the value and the mark agree (MGET, one
// slot); at the end the value is the highest token's, and every refusal
// named a higher token.
func TestSetConcurrentWriters(t *testing.T) {
	flushT(t)
	const writers, total = 8, 400
	var mu sync.Mutex
	var accepted, refused int
	var errs []error
	var wg sync.WaitGroup
	for w := range writers {
		c := clientT(t)
		wg.Go(func() {
			for i := w; i < total; i += writers {
				tok := fence.Token(i + 1)
				err := redisguard.Set(t.Context(), c, "{race}:value", tok, tok.String())
				var stale *fence.StaleError
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &stale) && stale.Token == tok && stale.Highest > tok:
					refused++
				default:
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	// A reader, meanwhile: the value and the mark move together.
	reader := clientT(t)
	for range 200 {
		vals, err := reader.MGet(t.Context(), "{race}:value", "{race}:value:fence-mark").Result()
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] != vals[1] {
			t.Fatalf("value %v with mark %v", vals[0], vals[1])
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if accepted+refused != total || accepted == 0 {
		t.Fatalf("%d accepted, %d refused of %d", accepted, refused, total)
	}
	if v := reader.Get(t.Context(), "{race}:value").Val(); v != fmt.Sprint(total) {
		t.Errorf("final value %q, want %d", v, total)
	}
	t.Logf("%d writers, %d writes: %d accepted, %d refused", writers, total, accepted, refused)
}

// TestSetOnACluster: on a 3-master Redis Cluster the key and its mark are
// in one slot (else the script fails with CROSSSLOT), for plain keys, keys
// with a hash tag (the first {...} with something inside, "}{x}" has "x")
// and keys with a '{' but no tag.
func TestSetOnACluster(t *testing.T) {
	cluster := redisproc.StartClusterT(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := t.Context()
	for _, key := range []string{"totals:1", "totals:2", "totals:3", "orders", "{tenant-7}:total", "a{b", "}{x}"} {
		if err := redisguard.Set(ctx, c, key, 3, "v3"); err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if err := redisguard.Set(ctx, c, key, 2, "v2"); !errors.Is(err, fence.ErrStale) {
			t.Errorf("%q: token 2 after 3: %v", key, err)
		}
		if v := c.Get(ctx, key).Val(); v != "v3" {
			t.Errorf("%q holds %q", key, v)
		}
	}
}
