package lockkey

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

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
