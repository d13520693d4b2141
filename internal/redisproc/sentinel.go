package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a local Sentinel set-up: one master, one replica of it, and one
// sentinel monitoring the master under MasterName with a quorum of 1, each a
// process on a free 127.0.0.1 port.
type Sentinel struct {
	MasterName string
	Master     *Server
	Replica    *Server
	Sentinel   *Server
	dir        string
}

// StartSentinel starts the master, the replica and the sentinel, and waits
// until ctx ends for the replica's link to be up and the sentinel to know
// the master and the replica. On error it stops what it started.
func StartSentinel(ctx context.Context) (*Sentinel, error) {
	st := &Sentinel{MasterName: "m"}
	fail := func(err error) (*Sentinel, error) {
		_ = st.Stop()
		return nil, err
	}
	var err error
	if st.Master, err = Start(Config{}); err != nil {
		return fail(err)
	}
	host, port, _ := strings.Cut(st.Master.Addr(), ":")
	if st.Replica, err = Start(Config{Args: []string{"--replicaof", host, port}}); err != nil {
		return fail(err)
	}
	if st.dir, err = os.MkdirTemp("", "quorumlock-sentinel-"); err != nil {
		return fail(err)
	}
	conf := filepath.Join(st.dir, "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 5000\n",
		st.MasterName, host, port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return fail(err)
	}
	if st.Sentinel, err = Start(Config{Dir: st.dir, ConfigFile: conf, Args: []string{"--sentinel"}}); err != nil {
		return fail(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: st.Replica.Addr(), MaxRetries: -1, DialerRetries: 1,
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true})
	defer rc.Close()
	err = pollUntil(ctx, func(ctx context.Context) (bool, error) {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up"), nil
	})
	if err != nil {
		return fail(fmt.Errorf("redisproc: replica %s never linked to its master: %w", st.Replica.Addr(), err))
	}
	sc := st.client()
	defer sc.Close()
	err = pollUntil(ctx, func(ctx context.Context) (bool, error) {
		reps, err := sc.Replicas(ctx, st.MasterName).Result()
		return err == nil && len(reps) > 0 && reps[0]["flags"] == "slave", nil
	})
	if err != nil {
		return fail(fmt.Errorf("redisproc: sentinel %s never saw the replica: %w", st.Sentinel.Addr(), err))
	}
	return st, nil
}

// StartSentinelT starts a Sentinel set-up for a test (see StartSentinel) and
// stops it in t.Cleanup.
func StartSentinelT(t testing.TB) *Sentinel {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := StartSentinel(ctx)
	if err != nil {
		t.Fatalf("starting a Sentinel set-up: %v", err)
	}
	t.Cleanup(func() { _ = st.Stop() })
	return st
}

func (st *Sentinel) client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: st.Sentinel.Addr(), MaxRetries: -1, DialerRetries: 1,
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true})
}

// MasterAddr asks the sentinel for the current master's host:port.
func (st *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	sc := st.client()
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(ctx, st.MasterName).Result()
	if err != nil {
		return "", err
	}
	if len(a) != 2 {
		return "", fmt.Errorf("redisproc: sentinel answered %q for the master address", a)
	}
	return a[0] + ":" + a[1], nil
}

// Failover forces a failover (SENTINEL FAILOVER) and waits until ctx ends
// for the sentinel to name the replica as the master. The old master becomes
// a replica of the new one.
func (st *Sentinel) Failover(ctx context.Context) error {
	sc := st.client()
	defer sc.Close()
	if err := sc.Failover(ctx, st.MasterName).Err(); err != nil {
		return fmt.Errorf("redisproc: SENTINEL FAILOVER: %w", err)
	}
	err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
		a, err := st.MasterAddr(ctx)
		return err == nil && a == st.Replica.Addr(), nil
	})
	if err != nil {
		return fmt.Errorf("redisproc: the sentinel never named %s master: %w", st.Replica.Addr(), err)
	}
	// The promoted replica must also accept writes.
	rc := redis.NewClient(&redis.Options{Addr: st.Replica.Addr(), MaxRetries: -1, DialerRetries: 1,
		DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true})
	defer rc.Close()
	return pollUntil(ctx, func(ctx context.Context) (bool, error) {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master"), nil
	})
}

// SentinelAddrs returns the sentinel's host:port, for
// redis.FailoverOptions.SentinelAddrs.
func (st *Sentinel) SentinelAddrs() []string { return []string{st.Sentinel.Addr()} }

// Stop stops the three processes and removes their directories. It is
// idempotent.
func (st *Sentinel) Stop() error {
	var errs []error
	for _, s := range []*Server{st.Sentinel, st.Replica, st.Master} {
		if s != nil {
			errs = append(errs, s.Stop())
		}
	}
	if st.dir != "" {
		errs = append(errs, os.RemoveAll(st.dir))
		st.dir = ""
	}
	return errors.Join(errs...)
}
