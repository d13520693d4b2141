package memnode

import (
	"context"
	"fmt"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// Peek implements redlock.PeekNode as redisnode does, with a GET of key and
// one of the lock's fencing counter (here in one step): the value key holds
// ("" when absent) and the counter (0 when absent). A key that holds a
// shared lock's holds fails with WRONGTYPE, and a counter key that holds no
// counter fails; the counter is read whichever run wrote it.
func (n *Node) Peek(ctx context.Context, key string) (string, int64, error) {
	fenceKey, err := n.fenceKey(key)
	if err != nil {
		return "", 0, err
	}
	var held, counter string
	var found bool
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		if held, _, fail = n.getLocked(key, now); fail != nil {
			return
		}
		counter, found, fail = n.getLocked(fenceKey, now)
	})
	switch {
	case err != nil:
		return "", 0, err
	case fail != nil:
		return "", 0, fmt.Errorf("memnode %s: GET: %w", n.addr, fail)
	case !found:
		return held, 0, nil
	}
	f, _, err := wire.ParseFence(counter)
	if err != nil {
		return "", 0, fmt.Errorf("memnode %s: the fencing counter %s %w", n.addr, quote(fenceKey), err)
	}
	return held, f, nil
}
