// Package ctxerr makes a go-redis error caused by the end of a context wrap
// ctx.Err(), so that callers can match it with errors.Is whatever go-redis
// made of it (a net timeout, for instance). It is used by redisnode and by
// the harness's raw key reader.
package ctxerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wrap returns err wrapping ctx.Err() when the context ended (or was about
// to: go-redis sets the socket deadline to the context's, so the socket can
// time out a moment before the context reports it). A Redis error reply is
// returned as it is, and so is an error that already wraps ctx.Err().
func Wrap(ctx context.Context, err error) error {
	var rerr redis.Error
	if err == nil || errors.As(err, &rerr) {
		return err
	}
	cerr := ctx.Err()
	if cerr == nil {
		var ne net.Error
		if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && time.Until(dl) < 5*time.Millisecond {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (%w)", cerr, err)
}
