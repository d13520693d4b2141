package bench

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// Rueidislock is github.com/redis/rueidis/rueidislock with its default
// settings (client-side caching for wake-ups, 20ms TryNextAfter, ExtendInterval
// half the validity) except KeyValidity = ttl and KeyMajority = N/2+1, so
// that its 2*KeyMajority-1 keys are one per master. rueidislock puts its keys
// on one deployment (a server or a cluster); here key i is routed to master i
// (a rueidis.Client that sends each script to the client of the master its
// key's index names), which makes it a quorum over N independent masters
// like the others. It takes the keys one after another until a majority
// holds, then the rest in the background; unlocking (the CancelFunc) waits
// for every key's release. Each master's rueidis client has DisableRetry,
// a 250ms dial timeout and a 500ms ConnWriteTimeout; rueidis applies context
// deadlines natively. Locker.WithContext then the CancelFunc.
func Rueidislock() Contender {
	return Contender{
		Name:     "rueidislock",
		Settings: "rueidislock defaults + KeyValidity=ttl, KeyMajority=N/2+1 (key i on master i); rueidis DisableRetry, 250ms dial, 500ms ConnWriteTimeout; WithContext + cancel",
		Open:     openRueidislock,
	}
}

// rueidisOption is the client option of every rueidis client of the run:
// m's address, user, password, db and TLS (unless dial, which does TLS
// itself, opens the connections).
func rueidisOption(m Master, dial DialFunc) rueidis.ClientOption {
	opt := rueidis.ClientOption{
		InitAddress:      []string{m.Addr},
		Username:         m.opt.Username,
		Password:         m.opt.Password,
		SelectDB:         m.opt.DB,
		TLSConfig:        m.opt.TLSConfig,
		DisableRetry:     true,
		Dialer:           net.Dialer{Timeout: dialTimeout},
		ConnWriteTimeout: ioTimeout,
	}
	if dial != nil {
		opt.TLSConfig = nil
		opt.DialCtxFn = func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		}
	}
	return opt
}

func openRueidislock(t Target) (Locker, error) {
	prefix := t.Key
	opt := rueidislock.LockerOption{
		KeyPrefix:    prefix,
		KeyValidity:  t.TTL,
		KeyMajority:  int32(len(t.Masters)/2 + 1),
		ClientOption: rueidisOption(t.Masters[0], t.dial(0)),
	}
	if len(t.Masters) > 1 {
		opt.ClientBuilder = func(o rueidis.ClientOption) (rueidis.Client, error) {
			r := &rueidisRouter{prefix: prefix + ":"}
			for i, m := range t.Masters {
				// the locker's tracking settings and invalidation callback,
				// with master i's address, credentials and dialer
				co, mo := o, rueidisOption(m, t.dial(i))
				co.InitAddress, co.Username, co.Password, co.SelectDB = mo.InitAddress, mo.Username, mo.Password, mo.SelectDB
				co.TLSConfig, co.DialCtxFn = mo.TLSConfig, mo.DialCtxFn
				c, err := rueidis.NewClient(co)
				if err != nil {
					r.Close()
					return nil, err
				}
				r.nodes = append(r.nodes, c)
			}
			r.Client = r.nodes[0]
			return r, nil
		}
	}
	l, err := rueidislock.NewLocker(opt)
	if err != nil {
		return nil, err
	}
	return &rueidisLocker{l: l}, nil
}

type rueidisLocker struct {
	l      rueidislock.Locker
	cancel context.CancelFunc
}

func (r *rueidisLocker) Lock(ctx context.Context) error {
	_, cancel, err := r.l.WithContext(ctx, "lock")
	r.cancel = cancel
	return err
}

func (r *rueidisLocker) Unlock(context.Context) error {
	r.cancel() // releases every key and waits for it
	return nil
}

func (r *rueidisLocker) Close() error {
	r.l.Close()
	return nil
}

// rueidisRouter is a rueidis.Client over N masters: rueidislock's scripts
// (EVALSHA sha 1 key ... or EVAL script 1 key ...) on key "prefix:i:name" go
// to master i; anything else to master 0. rueidislock only calls Do, B and
// Close.
type rueidisRouter struct {
	rueidis.Client // master 0
	nodes          []rueidis.Client
	prefix         string
}

func (r *rueidisRouter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return r.pick(cmd.Commands()).Do(ctx, cmd)
}

func (r *rueidisRouter) pick(args []string) rueidis.Client {
	if len(args) < 4 {
		return r.nodes[0]
	}
	rest, ok := strings.CutPrefix(args[3], r.prefix)
	if !ok {
		return r.nodes[0]
	}
	idx, _, _ := strings.Cut(rest, ":")
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(r.nodes) {
		return r.nodes[0]
	}
	return r.nodes[i]
}

// DoMulti sends each command on its own through Do (rueidislock does not
// use it; it is routed so that nothing reaches master 0 by mistake).
func (r *rueidisRouter) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	res := make([]rueidis.RedisResult, len(multi))
	for i, cmd := range multi {
		res[i] = r.Do(ctx, cmd)
	}
	return res
}

func (r *rueidisRouter) Close() {
	for _, c := range r.nodes {
		c.Close()
	}
}
