package redisnode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lock-safe go-redis settings of clients built by Dial.
const (
	dialTimeout = 250 * time.Millisecond
	ioTimeout   = 500 * time.Millisecond
)

// Dial builds a Node with its own go-redis client for one Redis master. It
// does not contact the server; Close closes the client.
//
// addr is either host:port (the port is required, 1..65535) or a URL
//
//	redis://[user[:password]@]host[:port][/db]
//	rediss://[user[:password]@]host[:port][/db][?ca_file=F&cert_file=F&key_file=F&server_name=N]
//
// with a default port of 6379 and db 0. rediss:// uses TLS (1.2 or later),
// verifying the server's certificate against ca_file (default: the system
// roots) and the name server_name (default: the host); cert_file and key_file
// (both or neither, PEM) present a client certificate. Any other query
// parameter, a query on redis://, a bad scheme, host, port or db, or an
// unreadable or invalid certificate file is an error starting "redisnode: "
// that names the bad part. No error and no Addr ever contains the password.
//
// The client is configured for a lock: context deadlines apply to socket I/O
// (ContextTimeoutEnabled), commands are never retried (MaxRetries -1: a
// retried acquire could be applied twice), one dial attempt (DialerRetries 1)
// with a 250ms DialTimeout, 500ms read, write and pool timeouts, RESP2, and no
// CLIENT SETINFO (DisableIdentity), so a minimal ACL suffices.
func Dial(addr string) (*Node, error) {
	opt, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DialTimeout = dialTimeout
	opt.ReadTimeout = ioTimeout
	opt.WriteTimeout = ioTimeout
	opt.PoolTimeout = ioTimeout
	opt.DisableIdentity = true
	opt.Protocol = 2
	return &Node{client: redis.NewClient(opt), addr: opt.Addr, notSent: true, owned: true}, nil
}

func parseAddr(addr string) (*redis.Options, error) {
	if addr == "" {
		return nil, errors.New("redisnode: empty address")
	}
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, "redis:") || strings.HasPrefix(addr, "rediss:") {
			return nil, errors.New("redisnode: a URL needs the form redis://host or rediss://host (address not shown: it may hold a password)")
		}
		if strings.Contains(addr, "@") {
			return nil, errors.New("redisnode: an address with '@' must be a redis:// or rediss:// URL (address not shown: it may hold a password)")
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("redisnode: address %q is neither host:port nor a redis:// or rediss:// URL", addr)
		}
		if host == "" {
			return nil, fmt.Errorf("redisnode: address %q has no host", addr)
		}
		if err := checkPort(port); err != nil {
			return nil, err
		}
		return &redis.Options{Addr: net.JoinHostPort(host, port)}, nil
	}
	return parseURL(addr)
}

func checkPort(port string) error {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return fmt.Errorf("redisnode: bad port %q (want 1..65535)", port)
	}
	return nil
}

// rawPassword extracts the password of a URL from its text, without parsing,
// so that even a URL that does not parse can be kept out of error messages.
func rawPassword(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return ""
	}
	rest := s[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pass, ok := strings.Cut(rest[:at], ":")
	if !ok {
		return ""
	}
	return pass
}

// redactURL replaces the password of a URL's text with "xxxxx".
func redactURL(s string) string {
	pass := rawPassword(s)
	if pass == "" {
		return s
	}
	i := strings.Index(s, "://") + 3
	rest := s[i:]
	end := len(rest)
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		end = j
	}
	at := strings.LastIndex(rest[:end], "@")
	user, _, _ := strings.Cut(rest[:at], ":")
	return s[:i] + user + ":xxxxx" + rest[at:]
}

func parseURL(addr string) (*redis.Options, error) {
	pass := rawPassword(addr)
	shown := redactURL(addr)
	u, err := url.Parse(addr)
	if err != nil {
		msg := fmt.Sprintf("redisnode: cannot parse URL %q", shown)
		var ue *url.Error
		if errors.As(err, &ue) {
			detail := ue.Err.Error()
			if pass == "" || !strings.Contains(detail, pass) {
				msg += ": " + detail
			}
		}
		return nil, errors.New(msg)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redisnode: unsupported scheme %q in %q (want redis or rediss)", u.Scheme, shown)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("redisnode: URL %q has no //host part", shown)
	}
	if u.Fragment != "" || strings.Contains(addr, "#") {
		return nil, fmt.Errorf("redisnode: URL %q has a #fragment", shown)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("redisnode: URL %q has no host", shown)
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, fmt.Errorf("redisnode: URL %q has an empty port", shown)
		}
		port = "6379"
	}
	if err := checkPort(port); err != nil {
		return nil, err
	}
	opt := &redis.Options{Addr: net.JoinHostPort(host, port)}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	switch p := strings.TrimPrefix(u.Path, "/"); {
	case u.Path == "" || u.Path == "/":
	default:
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 || strconv.Itoa(db) != p {
			return nil, fmt.Errorf("redisnode: bad db %q in URL (want /N with N >= 0)", p)
		}
		opt.DB = db
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("redisnode: bad query in URL %q", shown)
	}
	if u.Scheme == "redis" {
		for k := range q {
			return nil, fmt.Errorf("redisnode: query parameter %q is not allowed on redis:// (TLS parameters need rediss://)", k)
		}
		return opt, nil
	}
	tc, err := tlsConfig(host, q)
	if err != nil {
		return nil, err
	}
	opt.TLSConfig = tc
	return opt, nil
}

func tlsConfig(host string, q url.Values) (*tls.Config, error) {
	one := func(k string) (string, error) {
		vs := q[k]
		delete(q, k)
		switch {
		case len(vs) > 1:
			return "", fmt.Errorf("redisnode: query parameter %q given %d times", k, len(vs))
		case len(vs) == 1 && vs[0] == "":
			return "", fmt.Errorf("redisnode: query parameter %q is empty", k)
		case len(vs) == 1:
			return vs[0], nil
		}
		return "", nil
	}
	var vals [4]string
	for i, k := range []string{"ca_file", "cert_file", "key_file", "server_name"} {
		v, err := one(k)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	for k := range q {
		return nil, fmt.Errorf("redisnode: unknown query parameter %q (want ca_file, cert_file, key_file, server_name)", k)
	}
	caFile, certFile, keyFile, serverName := vals[0], vals[1], vals[2], vals[3]
	if serverName == "" {
		serverName = host
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("redisnode: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisnode: ca_file %q holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("redisnode: cert_file and key_file go together: give both or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("redisnode: cert_file %q / key_file %q: %w", certFile, keyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
