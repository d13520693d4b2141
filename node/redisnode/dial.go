package redisnode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockclient"
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
	lockclient.Configure(opt)
	return &Node{client: redis.NewClient(opt), addr: opt.Addr, notSent: true, owned: true, watch: new(watcher), config: new(atomic.Pointer[nodeConfig])}, nil
}

// maxShown bounds how much of a value a Dial error quotes.
const maxShown = 100

// quote quotes s for an error message, at most maxShown bytes of it (cut at
// a rune boundary) followed by "..." and its length when it is longer.
func quote(s string) string { return cut(s, maxShown, strconv.Quote) }

// bounded cuts an error text to about 2*maxShown bytes.
func bounded(s string) string { return cut(s, 2*maxShown, func(s string) string { return s }) }

// cut shows s through show, at most n bytes of it (cut at a rune boundary)
// followed by "..." and its length when it is longer.
func cut(s string, n int, show func(string) string) string {
	if len(s) <= n {
		return show(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", show(s[:n]), len(s))
}

// shownAddr is addr as Dial's errors may show it (quoted, bounded): a URL's
// whole userinfo (everything between "://" and the last '@', so also a
// password holding an unescaped '/', '?', '#' or '@', or a user-only
// userinfo) is replaced with "xxxxx", and a string that is no URL but may
// hold a password is not shown at all.
func shownAddr(addr string) string {
	scheme, rest, ok := strings.Cut(addr, "://")
	if !ok {
		if strings.Contains(addr, "@") || hasPrefixFold(addr, "redis:") || hasPrefixFold(addr, "rediss:") {
			return "(address not shown: it may hold a password)"
		}
		return quote(addr)
	}
	if strings.Contains(scheme, "@") {
		return "(address not shown: it may hold a password)"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	return quote(scheme + "://" + rest)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// checkChars refuses white space, control characters and invalid UTF-8
// anywhere: net.SplitHostPort accepts " host:1", which would fail only at
// the first call. In a URL, percent-encode them (a space is %20).
func checkChars(addr string) error {
	if strings.TrimSpace(addr) != addr {
		return fmt.Errorf("redisnode: address %s has leading or trailing white space", shownAddr(addr))
	}
	for i, r := range addr {
		switch {
		case unicode.IsControl(r) || r == utf8.RuneError:
			return fmt.Errorf("redisnode: address %s has a control character or invalid UTF-8 at byte %d", shownAddr(addr), i)
		case unicode.IsSpace(r):
			return fmt.Errorf("redisnode: address %s has white space at byte %d (in a URL, percent-encode it: %%20)", shownAddr(addr), i)
		}
	}
	return nil
}

func parseAddr(addr string) (*redis.Options, error) {
	if addr == "" {
		return nil, errors.New("redisnode: empty address")
	}
	if err := checkChars(addr); err != nil {
		return nil, err
	}
	if !strings.Contains(addr, "://") {
		if hasPrefixFold(addr, "redis:") || hasPrefixFold(addr, "rediss:") {
			return nil, errors.New("redisnode: a URL needs the form redis://host or rediss://host (address not shown: it may hold a password)")
		}
		if strings.Contains(addr, "@") {
			return nil, errors.New("redisnode: an address with '@' must be a redis:// or rediss:// URL (address not shown: it may hold a password)")
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("redisnode: address %s is neither host:port nor a redis:// or rediss:// URL", quote(addr))
		}
		if host == "" {
			return nil, fmt.Errorf("redisnode: address %s has no host", quote(addr))
		}
		if err := checkHost(host); err != nil {
			return nil, err
		}
		if err := checkPort(port); err != nil {
			return nil, err
		}
		return &redis.Options{Addr: net.JoinHostPort(host, port)}, nil
	}
	return parseURL(addr)
}

// maxHost is the longest host name DNS allows.
const maxHost = 253

func checkHost(host string) error {
	if len(host) > maxHost {
		return fmt.Errorf("redisnode: host %s is longer than %d bytes", quote(host), maxHost)
	}
	return nil
}

func checkPort(port string) error {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		shown := quote(port)
		if strings.ContainsAny(port, "?=&@/") { // a query string may carry a password
			shown = "(not shown: it may hold a password)"
		}
		return fmt.Errorf("redisnode: bad port %s (want 1..65535)", shown)
	}
	return nil
}

// validScheme reports whether s has the syntax of a URL scheme (RFC 3986:
// a letter, then letters, digits, '+', '-', '.'), so that it can be shown.
func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case r < utf8.RuneSelf && unicode.IsLetter(r):
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// parseURL parses a redis:// or rediss:// URL. It splits the userinfo off
// by hand before url.Parse sees the rest, so that no message built from the
// rest (a bad host, port, db or query) can hold a part of the password.
func parseURL(addr string) (*redis.Options, error) {
	shown := shownAddr(addr)
	scheme, rest, _ := strings.Cut(addr, "://")
	switch strings.ToLower(scheme) {
	case "redis", "rediss":
	default:
		if !validScheme(scheme) || len(scheme) > maxShown {
			return nil, fmt.Errorf("redisnode: unsupported scheme in %s (want redis or rediss)", shown)
		}
		return nil, fmt.Errorf("redisnode: unsupported scheme %q in %s (want redis or rediss)", scheme, shown)
	}
	authEnd := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authEnd = i
	}
	if strings.Contains(rest[authEnd:], "@") {
		return nil, fmt.Errorf("redisnode: URL %s has an '@' after its host part: percent-encode '/', '?', '#' and '@' in a user name or password (%%2F, %%3F, %%23, %%40), and '@' in a query value (%%40)", shown)
	}
	var user *url.Userinfo
	if at := strings.LastIndex(rest[:authEnd], "@"); at >= 0 {
		// url.Parse checks and unescapes the userinfo; its error (which
		// quotes a bad escape) is not shown.
		u, err := url.Parse("redis://" + rest[:at] + "@host")
		if err != nil || u.User == nil {
			return nil, fmt.Errorf("redisnode: URL %s has a bad user name or password (a character that must be percent-encoded, such as a space or '%%', or a bad %%XX escape; not shown)", shown)
		}
		user = u.User
		rest = rest[at+1:]
	}
	u, err := url.Parse(strings.ToLower(scheme) + "://" + rest)
	if err != nil {
		msg := fmt.Sprintf("redisnode: cannot parse URL %s", shown)
		var ue *url.Error
		if errors.As(err, &ue) {
			msg += ": " + bounded(ue.Err.Error())
		}
		return nil, errors.New(msg)
	}
	if u.Opaque != "" || u.User != nil {
		return nil, fmt.Errorf("redisnode: URL %s has no //host part", shown)
	}
	if u.Fragment != "" || strings.Contains(rest, "#") {
		return nil, fmt.Errorf("redisnode: URL %s has a #fragment", shown)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("redisnode: URL %s has no host", shown)
	}
	if err := checkHost(host); err != nil {
		return nil, err
	}
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return nil, fmt.Errorf("redisnode: URL %s has an empty port", shown)
		}
		port = "6379"
	}
	if err := checkPort(port); err != nil {
		return nil, err
	}
	opt := &redis.Options{Addr: net.JoinHostPort(host, port)}
	if user != nil {
		opt.Username = user.Username()
		opt.Password, _ = user.Password()
	}
	switch p := strings.TrimPrefix(u.Path, "/"); {
	case u.Path == "" || u.Path == "/":
	default:
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 || strconv.Itoa(db) != p {
			return nil, fmt.Errorf("redisnode: bad db %s in URL (want /N with N >= 0)", quote(p))
		}
		opt.DB = db
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("redisnode: bad query in URL %s", shown)
	}
	if u.Scheme == "redis" {
		for k := range q {
			return nil, fmt.Errorf("redisnode: query parameter %s is not allowed on redis:// (TLS parameters need rediss://)", quote(k))
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

// fileError names a certificate file that could not be read, bounded.
func fileError(param, file string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("redisnode: %s %s: %w", param, quote(file), err)
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
		return nil, fmt.Errorf("redisnode: unknown query parameter %s (want ca_file, cert_file, key_file, server_name)", quote(k))
	}
	caFile, certFile, keyFile, serverName := vals[0], vals[1], vals[2], vals[3]
	if serverName == "" {
		serverName = host
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fileError("ca_file", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisnode: ca_file %s holds no PEM certificate", quote(caFile))
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("redisnode: cert_file and key_file go together: give both or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return nil, fileError("cert_file/key_file", pe.Path, err)
			}
			return nil, fmt.Errorf("redisnode: cert_file %s / key_file %s: %s", quote(certFile), quote(keyFile), bounded(err.Error()))
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
