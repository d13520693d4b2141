// Package lockclient holds the go-redis settings of every client that talks
// to a lock's masters in this repository: redisnode.Dial's, the raw readers
// of the faultinject module and every contender of the bench module. They
// are written once, here, so that what the library promises (docs/nodes.md)
// is what its tools and its benchmark use.
package lockclient

import (
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Timeouts of a lock client.
const (
	DialTimeout = 250 * time.Millisecond
	IOTimeout   = 500 * time.Millisecond
)

// Configure makes opt lock-safe: context deadlines apply to socket I/O
// (ContextTimeoutEnabled), commands are never retried (MaxRetries -1: a
// retried acquire could be applied twice), one dial attempt (DialerRetries 1)
// with DialTimeout, IOTimeout for reads, writes and the pool, RESP2, no
// CLIENT SETINFO (DisableIdentity, so a minimal ACL suffices), and no
// maintenance notifications (they need RESP3; left on, go-redis v9.23's
// NewClient resolves the host name, for up to 2s, to classify the endpoint).
// The other fields of opt are left as they are.
func Configure(opt *redis.Options) *redis.Options {
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DialTimeout = DialTimeout
	opt.ReadTimeout = IOTimeout
	opt.WriteTimeout = IOTimeout
	opt.PoolTimeout = IOTimeout
	opt.DisableIdentity = true
	opt.Protocol = 2
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt
}
