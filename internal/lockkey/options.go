package lockkey

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockclient"
	"github.com/quorumlock/quorumlock/node/redisnode"
)

// Options returns go-redis options for a raw client of the master at addr,
// in any form redisnode.Dial takes: host:port, or a redis:// or rediss://
// URL with a user, a password, a db and TLS files. The client behaves like
// the lock's own (see ClientOptions). An invalid addr gives redisnode.Dial's
// error, which names the bad part and never contains the password; so does
// every error of the client built from the options.
func Options(addr string) (*redis.Options, error) {
	n, err := redisnode.Dial(addr) // the one parser that decides what is valid
	if err != nil {
		return nil, err
	}
	_ = n.Close()
	opt, err := parseValid(addr)
	if err != nil {
		return nil, err
	}
	return lockclient.Configure(opt), nil
}

// parseValid builds options from an address that redisnode.Dial accepted,
// the same way: the userinfo is split off at the last '@' before the first
// '/', '?' or '#' after "://", the port defaults to 6379, the path is the
// db, and rediss:// takes ca_file, cert_file, key_file and server_name.
// Its errors never quote addr.
func parseValid(addr string) (*redis.Options, error) {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		return &redis.Options{Addr: addr}, nil
	}
	scheme = strings.ToLower(scheme)
	authEnd := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authEnd = i
	}
	opt := &redis.Options{}
	if at := strings.LastIndex(rest[:authEnd], "@"); at >= 0 {
		u, err := url.Parse("redis://" + rest[:at] + "@host")
		if err != nil || u.User == nil {
			return nil, errors.New("lockkey: bad user name or password (not shown)")
		}
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
		rest = rest[at+1:]
	}
	u, err := url.Parse(scheme + "://" + rest)
	if err != nil {
		return nil, errors.New("lockkey: cannot parse the URL (not shown)")
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	opt.Addr = net.JoinHostPort(u.Hostname(), port)
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		opt.DB, _ = strconv.Atoi(p)
	}
	if scheme != "rediss" {
		return opt, nil
	}
	q := u.Query()
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get("server_name")}
	if tc.ServerName == "" {
		tc.ServerName = u.Hostname()
	}
	if f := q.Get("ca_file"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tc.RootCAs = pool
	}
	if cf, kf := q.Get("cert_file"), q.Get("key_file"); cf != "" {
		cert, err := tls.LoadX509KeyPair(cf, kf)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	opt.TLSConfig = tc
	return opt, nil
}
