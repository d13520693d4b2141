package lockkey

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

func TestParseOwner(t *testing.T) {
	cases := []struct {
		in   string
		want Owner
	}{
		{"0123abcd?host=h.example&label=svc+a&pid=42", Owner{Token: "0123abcd", Host: "h.example", PID: 42, Label: "svc a"}},
		{"0123abcd?host=h", Owner{Token: "0123abcd", Host: "h"}},
		{"tok?host=h&pid=7&at=1795000000123", Owner{Token: "tok", Host: "h", PID: 7, Since: time.UnixMilli(1795000000123)}},
		{"tok?at=soon", Owner{Token: "tok"}},
		{"tok?at=-5", Owner{Token: "tok"}},
		{"0123abcd", Owner{Token: "0123abcd"}},
		{"tok?label=me", Owner{Token: "tok", Label: "me"}},
		{"tok?bad=%zz", Owner{Token: "tok?bad=%zz"}},
		{"", Owner{}},
	}
	for _, c := range cases {
		if got := ParseOwner(c.in); got != c.want {
			t.Errorf("ParseOwner(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// TestInspectOnARealServer reads a mutex's string key, a lock shape's
// sorted set and an absent key on a real redis-server.
func TestInspectOnARealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	c := redis.NewClient(ClientOptions(srv.Addr()))
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "m", "tok?host=h", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, "s", redis.Z{Score: 1, Member: "r\nid1"}, redis.Z{Score: 2, Member: "r\nid2"}).Err(); err != nil {
		t.Fatal(err)
	}
	h, err := Inspect(ctx, c, "m")
	if err != nil || !h.Exists || h.Value != "tok?host=h" || h.TTL <= 0 {
		t.Errorf("string key: %+v, %v", h, err)
	}
	h, err = Inspect(ctx, c, "s")
	if err != nil || !h.Exists || !strings.HasPrefix(h.Value, "2 holds: r\nid1") || h.TTL != -1 {
		t.Errorf("sorted set: %+v, %v", h, err)
	}
	h, err = Inspect(ctx, c, "absent")
	if err != nil || h.Exists {
		t.Errorf("absent key: %+v, %v", h, err)
	}
}
