// Package redisnode connects the quorum lock to Redis through go-redis v9: a
// Node is one independent Redis master (a standalone server, a Redis Cluster
// or a Sentinel-managed master) seen through lock actions.
//
// Every call is bounded by its context: the clients the package accepts apply
// context deadlines to socket I/O, so a paused or unreachable master costs a
// call no more than its deadline. A call whose context ends returns an error
// wrapping ctx.Err(). An error reply of the server (CROSSSLOT, READONLY,
// WRONGTYPE, OOM, a script error) is returned as itself: errors.As finds the
// go-redis redis.Error and its text is unchanged. A reply that denies access
// (NOAUTH, WRONGPASS, NOPERM, and the reply of a command an ACL refused
// inside a script: Redis 7.0's "ERR The user executing the script can't
// ...") is wrapped: the error wraps redlock.ErrNodeDenied, names the node
// and what the server refused (the command, or the keys it may have
// refused; for a refusal inside a script, the script's commands on the line
// the reply names: "redlock: node denied access: host:port: refused GET
// (acquire.lua line 24): ERR The user executing the script ..."), and
// errors.As still finds the reply; on a client that never retries it also
// wraps redlock.ErrNotSent when the command was refused before it ran (not
// for a refusal inside a script, which may follow its writes). A dial the
// server refused wraps redlock.ErrNotSent and says "connection refused"; a
// dial that timed out does not wrap ErrNotSent (the server may be paused with
// a full accept queue, holding commands it will run when it resumes).
//
// Keys: every key a script touches for one lock shares the lock key's hash
// slot, so the scripts run through a Redis Cluster client. A lock key that
// contains '}' must carry a valid hash tag (a non-empty {...}).
//
// Release notifications and the fair queue (redlock.QueueNode): a release publishes the first live waiter of the
// lock's queue on the pub/sub channel "{key}:released", and Node.Watch
// subscribes to it through one PubSub connection per Node, read by one
// goroutine from the first Watch until Close. The queue is two sorted sets,
// "{key}:queue" and "{key}:queue:ttl", that expire with their last waiter.
// An ACL user needs PUBLISH, SUBSCRIBE, UNSUBSCRIBE, PING and the channels
// (&{key}:released) for notifications, and TIME and the sorted-set commands
// to queue (acl_queue_test.go lists them); the minimal ACL of docs/nodes.md
// still releases: a PUBLISH refused inside a script is ignored.
package redisnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/notsent"
	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/wire"

	"github.com/quorumlock/quorumlock/redlock"
)

// Node is one Redis master (or one Redis Cluster, or one Sentinel-managed
// master) behind the lock actions the quorum coordinator needs. Build it with
// Dial or New. It is safe for concurrent use by multiple goroutines and puts
// no cap on calls in flight. It starts no goroutines, except for release
// notifications: one from its first Watch until Close, and a short-lived one
// per newly watched key.
type Node struct {
	client redis.UniversalClient
	addr   string
	// notSent: a failed dial means the call certainly had no effect (a plain
	// client that never retries commands).
	notSent bool
	owned   bool
	// watch is shared by copies of the Node (String has a value receiver).
	watch *watcher
	// config holds the configuration record the checked calls send
	// (SetConfig); nil inside when there is none.
	config *atomic.Pointer[nodeConfig]
}

// New wraps a go-redis client the caller built and keeps owning: Close leaves
// it open. client must be a *redis.Client (including one from
// redis.NewFailoverClient, for Sentinel) or a *redis.ClusterClient with
// Options().Addrs set; a nil or typed-nil client, a *redis.Ring or any other
// type is an error.
//
// The client's options must set ContextTimeoutEnabled: true. Without it
// go-redis ignores context deadlines on socket reads and writes, so a paused
// master would block a lock call for ReadTimeout (times MaxRetries+1) instead
// of the coordinator's per-node deadline. Setting MaxRetries: -1 is advised:
// a retried acquire can be applied twice, and only then do failed dials on a
// plain *redis.Client count as "not sent".
//
// Addr is the client's address for a *redis.Client, "cluster(h1:p,h2:p,...)"
// (Options().Addrs) for a *redis.ClusterClient, and
// "sentinel(FailoverClient@<pointer>)" for a Sentinel client: go-redis v9.17
// does not expose the master name or sentinel addresses of the *redis.Client
// that NewFailoverClient returns, so the pointer keeps two such Nodes apart.
func New(client redis.UniversalClient) (*Node, error) {
	const why = "; set it: without it go-redis ignores context deadlines on socket I/O and a paused master blocks a lock call for ReadTimeout, times MaxRetries+1, instead of the call's deadline"
	switch c := client.(type) {
	case nil:
		return nil, errors.New("redisnode: nil client")
	case *redis.Client:
		if c == nil {
			return nil, errors.New("redisnode: nil *redis.Client")
		}
		o := c.Options()
		if !o.ContextTimeoutEnabled {
			return nil, errors.New("redisnode: the *redis.Client's options lack ContextTimeoutEnabled: true" + why)
		}
		if o.Addr == "FailoverClient" {
			return &Node{client: c, addr: fmt.Sprintf("sentinel(FailoverClient@%p)", c), watch: new(watcher), config: new(atomic.Pointer[nodeConfig])}, nil
		}
		// go-redis normalises MaxRetries: -1 (none) becomes 0, 0 becomes 3.
		return &Node{client: c, addr: o.Addr, notSent: o.MaxRetries <= 0, watch: new(watcher), config: new(atomic.Pointer[nodeConfig])}, nil
	case *redis.ClusterClient:
		if c == nil {
			return nil, errors.New("redisnode: nil *redis.ClusterClient")
		}
		o := c.Options()
		if !o.ContextTimeoutEnabled {
			return nil, errors.New("redisnode: the *redis.ClusterClient's options lack ContextTimeoutEnabled: true" + why)
		}
		if len(o.Addrs) == 0 {
			return nil, errors.New("redisnode: the *redis.ClusterClient has no Options().Addrs (built with ClusterSlots or NewFailoverClusterClient?); give it the cluster's seed addresses")
		}
		return &Node{client: c, addr: "cluster(" + strings.Join(o.Addrs, ",") + ")", watch: new(watcher), config: new(atomic.Pointer[nodeConfig])}, nil
	case *redis.Ring:
		if c == nil {
			return nil, errors.New("redisnode: nil *redis.Ring")
		}
		return nil, errors.New("redisnode: *redis.Ring is not supported: it shards keys over masters by client-side hashing and moves keys when a shard comes or goes; use one Node per master, a *redis.ClusterClient or a Sentinel *redis.Client")
	default:
		return nil, fmt.Errorf("redisnode: unsupported client type %T (want *redis.Client or *redis.ClusterClient)", client)
	}
}

// String returns "redisnode.Node(" + Addr() + ")": printing a Node with
// %v or %+v never shows its client's options (a password).
func (n Node) String() string { return "redisnode.Node(" + n.addr + ")" }

// GoString is String, for %#v.
func (n Node) GoString() string { return n.String() }

// Addr names the node in errors and stats: host:port for a standalone master,
// "cluster(...)" or "sentinel(...)" for the other kinds. It never contains a
// password.
func (n *Node) Addr() string { return n.addr }

// Close ends the Node's watches (Watch) and waits for their goroutine, and
// closes the client if Dial built it; a client passed to New is left open
// for its owner.
func (n *Node) Close() error {
	n.watch.close()
	if n.owned {
		return n.client.Close()
	}
	return nil
}

// Acquire sets key to value with a TTL of ttl if key is absent (SET NX PX),
// unless a guarded Release of the same key and value already ran on the
// server. It reports true when key now holds value, also when it already did
// (a retried copy of the same acquire; the TTL is then unchanged), and false
// when another value holds key or a release guard refused the acquire. ttl is
// rounded down to whole milliseconds and must be at least one.
func (n *Node) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	cfg := n.config.Load()
	ms, err := n.keyMillis(cfg, ttl)
	if err != nil {
		return false, err
	}
	a, err := argsFor(key, value, ms)
	if err != nil {
		return false, err
	}
	s := acquireFast
	res, err := n.evalWith(ctx, cfg, s, []any{"evalsha", s.hashArg, s.keysArg, a.keyArg, a.guardArg, a.valueArg, a.ms(ms)})
	return res == 1, err
}

// AcquireFenced is Acquire that also reads, in the same atomic step, the
// lock's fencing counter on this server: the key "{key}:fence" (or
// "key:fence" when key has a hash tag), kept as RaiseFenceKeep says. The
// counter reads as 0 when the server has none or when another run of the
// server wrote it (a counter brought back from the disk after a restart may
// be older than what the server had handed out; scripts/acquire_fenced.lua).
// It implements redlock.FencingNode.
func (n *Node) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	cfg := n.config.Load()
	ms, guard, fence, err := n.fencedArgs(cfg, key, value, ttl)
	if err != nil {
		return false, 0, err
	}
	var res []any
	err = n.do(ctx, func(ctx context.Context) error {
		var err error
		s, keys, args := n.checked(cfg, fencedScript, []string{key, guard, fence}, []any{value, ms, fenceFlags(), cfg.epochArg()})
		res, err = s.Run(ctx, n.client, keys, args...).Slice()
		return err
	})
	if err != nil {
		return false, 0, withKeys(err, []string{key, guard, fence})
	}
	acquired, counter, ok := twoInts(res)
	if !ok {
		return false, 0, fmt.Errorf("redisnode: %s: acquire_fenced.lua returned %v, want [int, int]", n.addr, res)
	}
	return acquired == 1, counter, nil
}

// fencedArgs checks an acquire that reads the fencing counter (AcquireFenced,
// AcquireQueued) and returns its TTL in milliseconds, its release-guard key
// and the lock's fencing counter key.
func (n *Node) fencedArgs(cfg *nodeConfig, key, value string, ttl time.Duration) (ms int64, guard, fence string, err error) {
	if ms, err = n.keyMillis(cfg, ttl); err != nil {
		return 0, "", "", err
	}
	if guard, err = guardKey(key, value); err != nil {
		return 0, "", "", err
	}
	if fence, err = fenceKey(key); err != nil {
		return 0, "", "", err
	}
	return ms, guard, fence, nil
}

// fenceFlags is acquire_fenced.lua's test-only flags argument: "anyrun"
// reads a counter whatever server run wrote it (knobs.NoRunStamp),
// "nostamp" whatever configuration epoch (knobs.NoConfigStamp); "" in
// production.
func fenceFlags() any {
	return testFlags(knobs.NoRunStamp.Load(), "anyrun", knobs.NoConfigStamp.Load(), "nostamp")
}

// testFlags is a script's test-only flags argument (internal/knobs): the
// names whose switch is on, space-separated; "" (boxed once) when none is,
// as in production. Its arguments alternate a switch and its flag's name.
func testFlags(pairs ...any) any {
	var out string
	for i := 0; i+1 < len(pairs); i += 2 {
		if on, _ := pairs[i].(bool); on {
			if out != "" {
				out += " "
			}
			out += pairs[i+1].(string)
		}
	}
	if out == "" {
		return noFlags
	}
	return out
}

// noFlags is the empty flags argument, boxed once.
var noFlags any = ""

// RaiseFence raises the lock's fencing counter to token (never lowers it),
// only while key still holds value, and reports whether key held it; the
// counter is then kept for ever (RaiseFenceKeep with keep 0). It implements
// redlock.FencingNode.
func (n *Node) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	return n.RaiseFenceKeep(ctx, key, value, token, 0)
}

// RaiseFenceKeep is RaiseFence that, while key holds value, also sets the
// counter's time to live to keep (in whole milliseconds, at least one),
// whether or not it raised it; keep = 0 removes its time to live. It
// implements redlock.FenceExpiryNode.
func (n *Node) RaiseFenceKeep(ctx context.Context, key, value string, token int64, keep time.Duration) (bool, error) {
	var ms int64
	if keep != 0 {
		var err error
		if ms, err = ttlMillis(keep); err != nil {
			return false, err
		}
	}
	fence, err := fenceKey(key)
	if err != nil {
		return false, err
	}
	cfg := n.config.Load()
	res, err := n.runWith(ctx, cfg, raiseScript, []string{key, fence}, value, token, ms, cfg.epochArg())
	return res == 1, err
}

// Peek returns the value key holds ("" when it is absent) and the lock's
// fencing counter (0 when it has none; whichever server run wrote it): two GETs in one round trip (a
// pipeline; GET is in the minimal ACL of docs/nodes.md, MGET is not), so
// not one atomic step. It changes nothing. A key that holds a shared lock's
// holds fails with WRONGTYPE. It implements redlock.PeekNode.
func (n *Node) Peek(ctx context.Context, key string) (string, int64, error) {
	fence, err := fenceKey(key)
	if err != nil {
		return "", 0, err
	}
	var value, counter string
	err = n.do(ctx, func(ctx context.Context) error {
		pipe := n.client.Pipeline()
		v, f := pipe.Get(ctx, key), pipe.Get(ctx, fence)
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for _, c := range []*redis.StringCmd{v, f} {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
		}
		value, counter = v.Val(), f.Val()
		return nil
	})
	if err != nil {
		return "", 0, withKeys(err, []string{key, fence})
	}
	if counter == "" {
		return value, 0, nil
	}
	f, _, err := wire.ParseFence(counter)
	if err != nil {
		return "", 0, fmt.Errorf("redisnode: %s: the lock's fencing counter %w (%d bytes)", n.addr, err, len(counter))
	}
	return value, f, nil
}

var (
	_ redlock.FenceExpiryNode = (*Node)(nil)
	_ redlock.PeekNode        = (*Node)(nil)
)

// Extend resets the TTL of key to ttl if key holds value
// (compare-and-pexpire) and reports whether it did. It never creates the key.
// ttl is rounded down to whole milliseconds and must be at least one.
func (n *Node) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	cfg := n.config.Load()
	ms, err := n.keyMillis(cfg, ttl)
	if err != nil {
		return false, err
	}
	a, err := argsFor(key, value, ms)
	if err != nil { // a key without a valid hash tag has no guard key, but extends
		res, err := n.runWith(ctx, cfg, extendScript, []string{key}, value, ms)
		return res == 1, err
	}
	s := extendFast
	res, err := n.evalWith(ctx, cfg, s, []any{"evalsha", s.hashArg, s.keysArg, a.keyArg, a.valueArg, a.ms(ms)})
	return res == 1, err
}

// Release deletes key if it holds value (compare-and-delete) and reports
// whether it did. When key does not hold value and guard > 0, it leaves a
// release guard for guard (rounded down to milliseconds, at least one): an
// Acquire of the same key and value that reaches the server later (a copy
// sent before the release, on a slow path) is refused instead of leaving an
// orphan key. After a delete, when someone waits in the lock's line, it
// names the line's first live waiter to the lock's watchers (see Watch).
func (n *Node) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	var gms int64
	if guard > 0 {
		gms = max(guard.Milliseconds(), 1)
	}
	a, err := argsFor(key, value, gms)
	if err != nil {
		return false, err
	}
	s := releaseFast
	res, err := n.eval(ctx, s, []any{"evalsha", s.hashArg, s.keysArg, a.keyArg, a.guardArg, a.queueArg, a.qttlArg, a.qvalArg, a.grantArg, a.valueArg, a.ms(gms), a.chanArg, testFlags(knobs.NoGrant.Load(), "nogrant", knobs.NoGrantHoldRelease.Load(), "nohold")})
	return res == 1, err
}

// Info identifies the server process, from INFO server, replication and
// cpu (internal/redisinfo): RunID is run_id and Uptime is the CPU time of
// the server's main thread, a bound of its real uptime that no step of the
// server's wall clock inflates (at most uptime_in_seconds less one second;
// 0 on a server that does not report it), except on a master that was
// promoted from a replica (master_replid2 set), whose Uptime is 0: it may
// lack keys written on the old master until its promotion, at a time INFO
// does not tell. A Sentinel client reads the current master, so
// a failover shows as a new RunID (it is a restart for the lock). A Cluster
// client reads every master: RunID is their run_ids, sorted and joined with
// ",", and Uptime is the smallest uptime, so any master's restart or a
// failover changes the identity. Settings holds the fields of INFO memory,
// persistence, server and replication that the client checks at its first
// contact with a server (eviction policy, AOF, role, replicas, version);
// a Cluster client leaves it nil.
func (n *Node) Info(ctx context.Context) (redlock.ServerInfo, error) {
	if cc, ok := n.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var ids []string
		var up time.Duration
		err := n.do(ctx, func(ctx context.Context) error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				text, err := infoText(ctx, c)
				if err != nil {
					return err
				}
				si, err := redisinfo.Parse(c.Options().Addr, text)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if len(ids) == 0 || si.Uptime < up {
					up = si.Uptime
				}
				ids = append(ids, si.RunID)
				return nil
			})
		})
		if err != nil {
			return redlock.ServerInfo{}, err
		}
		if len(ids) == 0 {
			return redlock.ServerInfo{}, fmt.Errorf("redisnode: %s: cluster has no masters", n.addr)
		}
		slices.Sort(ids)
		return redlock.ServerInfo{RunID: strings.Join(ids, ","), Uptime: up}, nil
	}
	var text string
	err := n.do(ctx, func(ctx context.Context) error {
		var err error
		text, err = infoText(ctx, n.client)
		return err
	})
	if err != nil {
		return redlock.ServerInfo{}, err
	}
	return redisinfo.Parse(n.addr, text)
}

// infoText reads the server, replication, memory, persistence and cpu
// sections of INFO (the identity, the uptime bound, and the settings the
// client checks at its first contact). Redis before 7.0 takes one section per INFO and refuses more
// with a wrong-arity error: then it reads the default sections, which hold
// them all.
func infoText(ctx context.Context, c redis.Cmdable) (string, error) {
	text, err := c.Info(ctx, "server", "replication", "memory", "persistence", "cpu").Result()
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.Contains(rerr.Error(), "wrong number of arguments") {
		return c.Info(ctx).Result()
	}
	return text, err
}

func (n *Node) run(ctx context.Context, s *redis.Script, keys []string, args ...any) (int64, error) {
	return n.runWith(ctx, n.config.Load(), s, keys, args...)
}

// runWith is run with the Node's configuration as the call loaded it
// (checked).
func (n *Node) runWith(ctx context.Context, cfg *nodeConfig, s *redis.Script, keys []string, args ...any) (int64, error) {
	var res int64
	s, keys, args = n.checked(cfg, s, keys, args)
	err := n.do(ctx, func(ctx context.Context) error {
		var err error
		res, err = s.Run(ctx, n.client, keys, args...).Int64()
		return err
	})
	if err != nil {
		err = withKeys(err, keys)
	}
	return res, err
}

// do runs fn and classifies its error: a Redis error reply as itself, except
// a denial (NOAUTH, WRONGPASS, NOPERM, or a command refused inside a
// script), which is a *deniedError: it wraps redlock.ErrNodeDenied and the
// reply and names the node and what was refused (callers that know the
// call's keys add them with withKeys); a context expiry wrapping ctx.Err();
// a failed dial of a client that never retries wrapping redlock.ErrNotSent
// when notsent.Dial says nothing can have been sent (a refused connection,
// not a timed-out dial).
func (n *Node) do(ctx context.Context, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", redlock.ErrNotSent, err)
	}
	err := fn(ctx)
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		if denied(rerr) {
			return &deniedError{addr: n.addr, reply: err, notSent: n.notSent && unexecuted(rerr)}
		}
		if staleConfig(rerr) {
			return &configError{addr: n.addr, reply: err}
		}
		return err
	}
	err = ctxerr.Wrap(ctx, err)
	if n.notSent {
		return notsent.Dial(err)
	}
	return err
}

func ttlMillis(ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("redisnode: %w: ttl %v is below one millisecond", redlock.ErrNotSent, ttl)
	}
	return ms, nil
}

// checkKey refuses a key whose derived keys (package wire) could not
// share its Redis Cluster slot: one with a '}' but no valid hash tag
// (wire.Slottable).
func checkKey(key string) error {
	if wire.Slottable(key) {
		return nil
	}
	return fmt.Errorf("redisnode: %w: key %s has '}' but no valid hash tag (a non-empty {...}), so its keys could not share one cluster slot", redlock.ErrNotSent, quote(key))
}

// guardKey names the release-guard key of key for value (wire.GuardKey),
// in key's Cluster slot; checkKey's error for a key it refuses.
func guardKey(key, value string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return wire.GuardKey(key, value), nil
}

// fenceKey names the fencing counter of key (wire.FenceKey), in key's
// Cluster slot; checkKey's error for a key it refuses.
func fenceKey(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return wire.FenceKey(key), nil
}
