package memnode

import (
	"context"
	"fmt"
	"strconv"
)

// Peek implements redlock.PeekNode as redisnode does, with one MGET of key
// and the lock's fencing counter: the value key holds ("" when it is absent
// or holds no string, such as a shared lock's holds) and the counter (0 when
// absent), read in one step. A counter that holds no integer fails.
func (n *Node) Peek(ctx context.Context, key string) (string, int64, error) {
	fenceKey, err := n.fenceKey(key)
	if err != nil {
		return "", 0, err
	}
	var held, counter string
	var found bool
	err = n.do(ctx, func() {
		now := n.clock()
		held, _, _ = n.getLocked(key, now) // MGET reads a key of another type as nil
		counter, found, _ = n.getLocked(fenceKey, now)
	})
	if err != nil {
		return "", 0, err
	}
	if !found {
		return held, 0, nil
	}
	f, err := strconv.ParseInt(counter, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("memnode %s: the fencing counter %s holds no integer", n.addr, quote(fenceKey))
	}
	return held, f, nil
}
