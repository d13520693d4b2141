package redisproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster of masters only, each a redis-server
// process on free 127.0.0.1 ports (client and cluster-bus ports both picked
// free).
type Cluster struct {
	// Servers are the masters, in the order they were created.
	Servers []*Server
}

// ErrNoCLI is returned when redis-cli (needed to create a cluster) is missing.
var ErrNoCLI = errors.New("redisproc: redis-cli not found in PATH (install it: apt-get install -y redis-tools)")

// StartCluster starts masters redis-server processes with cluster mode on,
// joins them with redis-cli --cluster create (no replicas, all 16384 slots
// spread over the masters) and waits, until ctx ends, for CLUSTER INFO to
// say cluster_state:ok on every one. On error it stops what it started.
func StartCluster(ctx context.Context, masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redisproc: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrNoCLI
	}
	c := &Cluster{}
	for len(c.Servers) < masters {
		s, err := startClusterNode()
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.Stdin = strings.NewReader("yes\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("redisproc: redis-cli --cluster create: %w\n%s", err, tail(out.Bytes(), 2000))
	}
	if err := c.waitOK(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// StartClusterT starts a cluster for a test (see StartCluster) and stops it in
// t.Cleanup. A missing redis-server or redis-cli fails the test under CI=true
// and skips it otherwise.
func StartClusterT(t testing.TB, masters int) *Cluster {
	t.Helper()
	Require(t)
	_, err := exec.LookPath("redis-cli")
	if err != nil {
		err = ErrNoCLI
	}
	RequireOrSkip(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, masters)
	if err != nil {
		t.Fatalf("starting a Redis Cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func startClusterNode() (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		bus, err := FreePort()
		if err != nil {
			return nil, err
		}
		if bus == port {
			continue
		}
		s, err := Start(Config{Port: port, Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000",
		}})
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func (c *Cluster) waitOK(ctx context.Context) error {
	for _, s := range c.Servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1,
			DisableIdentity: true, Protocol: 2, ContextTimeoutEnabled: true})
		err := pollUntil(ctx, func(ctx context.Context) (bool, error) {
			info, err := rc.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok"), nil
		})
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("redisproc: cluster node %s never reported cluster_state:ok: %w", s.Addr(), err)
		}
	}
	return nil
}

// pollUntil calls cond every 20ms until it reports true or an error, or ctx
// ends (then the error wraps ctx.Err()).
func pollUntil(ctx context.Context, cond func(context.Context) (bool, error)) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := cond(cctx)
		cancel()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Addrs returns the masters' host:port addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		a[i] = s.Addr()
	}
	return a
}

// Stop stops every process of the cluster and removes their directories. It
// is idempotent.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Servers {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
