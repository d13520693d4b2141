package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockclient"
	"github.com/quorumlock/quorumlock/node/redisnode"
)

// A Master is one Redis master of a run. Its String is its host:port: a
// Master never prints its password.
type Master struct {
	// Addr is the master's host:port.
	Addr string
	// dialAddr is what redisnode.Dial takes: the address or URL as given.
	dialAddr string
	// opt holds the address, user, password, db and TLS settings; the
	// lock settings (lockclient) are applied per client.
	opt *redis.Options
}

// String returns m.Addr.
func (m Master) String() string { return m.Addr }

// GoString returns m.Addr, for %#v.
func (m Master) GoString() string { return m.Addr }

// ParseMasters reads masters the way redisnode.Dial does: host:port, or a
// URL redis://[user[:password]@]host[:port][/db] or rediss://...
// [?ca_file=F&cert_file=F&key_file=F&server_name=N]. Each one is checked by
// redisnode.Dial (whose error, which never shows a password, is returned
// as is); the other contenders get the equivalent go-redis options
// (redis.ParseURL, with the TLS parameters applied the same way) and the
// rueidis options built from them.
func ParseMasters(nodes []string) ([]Master, error) {
	ms := make([]Master, 0, len(nodes))
	for i, s := range nodes {
		nd, err := redisnode.Dial(s)
		if err != nil {
			return nil, fmt.Errorf("bench: master %d: %w", i+1, err)
		}
		addr := nd.Addr()
		if err := nd.Close(); err != nil {
			return nil, fmt.Errorf("bench: master %d (%s): %w", i+1, addr, err)
		}
		opt, err := peerOptions(s)
		if err != nil {
			return nil, fmt.Errorf("bench: master %d (%s): %w", i+1, addr, err)
		}
		ms = append(ms, Master{Addr: addr, dialAddr: s, opt: opt})
	}
	return ms, nil
}

// mastersAt returns plain masters at the given host:port addresses.
func mastersAt(addrs []string) []Master {
	ms := make([]Master, len(addrs))
	for i, a := range addrs {
		ms[i] = Master{Addr: a, dialAddr: a, opt: &redis.Options{Addr: a}}
	}
	return ms
}

// tlsParams are the rediss:// query parameters redisnode.Dial reads and
// redis.ParseURL does not.
var tlsParams = []string{"ca_file", "cert_file", "key_file", "server_name"}

// peerOptions returns the go-redis options of a master that redisnode.Dial
// accepted. No error shows the URL.
func peerOptions(s string) (*redis.Options, error) {
	if !strings.Contains(s, "://") {
		return &redis.Options{Addr: s}, nil
	}
	base, query, _ := strings.Cut(s, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, errors.New("bench: bad query in the URL (not shown: it may hold a password)")
	}
	opt, err := redis.ParseURL(base)
	if err != nil {
		return nil, errors.New("bench: go-redis cannot parse the URL that redisnode.Dial accepted (not shown: it may hold a password)")
	}
	if opt.TLSConfig == nil {
		return opt, nil
	}
	get := func(k string) string { return q.Get(k) }
	if n := get("server_name"); n != "" {
		opt.TLSConfig.ServerName = n
	}
	if f := get("ca_file"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("bench: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("bench: ca_file %q holds no PEM certificate", f)
		}
		opt.TLSConfig.RootCAs = pool
	}
	if cf, kf := get("cert_file"), get("key_file"); cf != "" || kf != "" {
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			return nil, fmt.Errorf("bench: cert_file/key_file: %w", err)
		}
		opt.TLSConfig.Certificates = []tls.Certificate{cert}
	}
	for _, k := range tlsParams {
		q.Del(k)
	}
	for k := range q {
		return nil, fmt.Errorf("bench: query parameter %q is not supported", k)
	}
	return opt, nil
}

// GoRedisOptions returns the options of every go-redis client of the run,
// whichever contender uses it: m's address, user, password, db and TLS,
// with the settings redisnode.Dial gives its own clients
// (internal/lockclient), so that no contender pays for go-redis defaults
// that ignore its deadlines. dial, when not nil, opens the connections
// (TLS included).
func (m Master) GoRedisOptions(dial DialFunc) *redis.Options {
	o := *m.opt
	opt := lockclient.Configure(&o)
	if dial != nil {
		opt.Dialer = dial
		opt.TLSConfig = nil // dial does the handshake
	}
	return opt
}

// baseDial opens a connection to m as its clients would: TCP with the
// lock clients' dial timeout, then TLS when m's URL asks for it.
func (m Master) baseDial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil || m.opt.TLSConfig == nil {
		return conn, err
	}
	tc := tls.Client(conn, m.opt.TLSConfig.Clone())
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
