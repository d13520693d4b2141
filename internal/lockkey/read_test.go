package lockkey

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestReadOnARealServer reads a mutex with its fencing counter, a lock
// shape's live holds (an expired one left out, a member's newline
// splitting group from id) with its waiting writers, a hash-tagged name's
// derived keys, and an absent lock.
func TestReadOnARealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	c := redis.NewClient(ClientOptions(srv.Addr()))
	defer c.Close()
	ctx := t.Context()
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	for _, cmd := range [][]any{
		{"SET", "m", "tok?host=h&pid=7", "PX", "60000"},
		{"SET", "{m}:fence", "42"},
		{"ZADD", "rw", ms + 60000, "r\ntok1?pid=1", ms + 30000, "r\ntok2?pid=2", ms - 1000, "r\nexpired"},
		{"ZADD", "{rw}:waiting", ms + 60000, "writer"},
		{"ZADD", "{m}:queue", ms, "g.1"},
		{"ZADD", "{m}:queue:ttl", ms + 60000, "g.1"},
		{"SET", "{m}:release-guard:0123", "1"},
		{"SET", "locks:leader:term:0123456789abcdef0123456789abcdef", "3"},
		{"SET", "a{t}b", "x"},
		{"SET", "a{t}b:fence", "9"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(cmd, err)
		}
	}
	l, err := Read(ctx, c, "m")
	if err != nil || l.Type != "string" || l.Value != "tok?host=h&pid=7" || l.TTL <= 0 || l.TTL > time.Minute || !l.HasFence || l.Fence != 42 || len(l.Holds) != 0 {
		t.Errorf("mutex: %+v, %v", l, err)
	}
	l, err = Read(ctx, c, "rw")
	if err != nil || l.Type != "zset" || len(l.Holds) != 2 || l.Waiting != 1 || l.HasFence {
		t.Fatalf("read-write lock: %+v, %v", l, err)
	}
	if h := l.Holds[0]; h.Group != "r" || h.ID != "tok2?pid=2" || h.Kind() != "reader" || h.TTL <= 0 || h.TTL > 30*time.Second {
		t.Errorf("first hold (soonest expiry): %+v", h)
	}
	if h := l.Holds[1]; h.ID != "tok1?pid=1" || h.TTL <= 30*time.Second-time.Second {
		t.Errorf("second hold: %+v", h)
	}
	l, err = Read(ctx, c, "a{t}b")
	if err != nil || l.Value != "x" || l.TTL != -1 || l.Fence != 9 {
		t.Errorf("hash-tagged name: %+v, %v", l, err)
	}
	l, err = Read(ctx, c, "absent")
	if err != nil || l.Type != "none" || l.HasFence || len(l.Holds) != 0 {
		t.Errorf("absent lock: %+v, %v", l, err)
	}

	names, more, err := Scan(ctx, c, "*", 100)
	if err != nil || more || strings.Join(slices.Sorted(slices.Values(names)), " ") != "a{t}b m rw" {
		t.Errorf("Scan(*) = %q, %v, %v; want the three locks without their derived keys (counters, waiting marks, line, guard, term record)", names, more, err)
	}
	names, more, err = Scan(ctx, c, "*", 2)
	if err != nil || !more || len(names) != 2 {
		t.Errorf("Scan(*, limit 2) = %q, %v, %v", names, more, err)
	}
}

// TestOptionsTakesDialsForms: Options accepts what redisnode.Dial accepts,
// with the same meaning, and refuses what it refuses with its error (no
// password shown).
func TestOptionsTakesDialsForms(t *testing.T) {
	for _, c := range []struct {
		in             string
		addr, user, pw string
		db             int
		tls            bool
	}{
		{"127.0.0.1:7001", "127.0.0.1:7001", "", "", 0, false},
		{"redis://h.example", "h.example:6379", "", "", 0, false},
		{"REDIS://u:p%40ss%2Cw@h:7/3", "h:7", "u", "p@ss,w", 3, false},
		{"redis://:only-pw@[::1]:7001/", "[::1]:7001", "", "only-pw", 0, false},
		{"rediss://u@h:7?server_name=n", "h:7", "u", "", 0, true},
	} {
		o, err := Options(c.in)
		if err != nil {
			t.Errorf("Options(%q): %v", c.in, err)
			continue
		}
		if o.Addr != c.addr || o.Username != c.user || o.Password != c.pw || o.DB != c.db || (o.TLSConfig != nil) != c.tls || !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
			t.Errorf("Options(%q) = addr %q user %q pw %q db %d tls %v", c.in, o.Addr, o.Username, o.Password, o.DB, o.TLSConfig != nil)
		}
		if c.tls && o.TLSConfig.ServerName != "n" {
			t.Errorf("Options(%q): server name %q", c.in, o.TLSConfig.ServerName)
		}
	}
	for _, in := range []string{"h", "redis://u:Secret-1@h:0", "redis://u:Secret-1@h?x=1", "rediss://u:Secret-1@h?ca_file=/nonexistent"} {
		_, err := Options(in)
		if err == nil || !strings.HasPrefix(err.Error(), "redisnode: ") || strings.Contains(err.Error(), "Secret-1") {
			t.Errorf("Options(%q) = %v; want redisnode's error without the password", in, err)
		}
	}
}
