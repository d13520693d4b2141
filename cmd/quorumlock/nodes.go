package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/node/redisnode"
)

// The environment variables that name the masters when no flag does.
const (
	envNodes     = "QUORUMLOCK_NODES"
	envNodesFile = "QUORUMLOCK_NODES_FILE"
)

// nodeFlags are the flags that name the masters, shared by run, status and
// doctor.
type nodeFlags struct {
	list, file string
}

func addNodeFlags(fs *flag.FlagSet) *nodeFlags {
	nf := &nodeFlags{}
	fs.StringVar(&nf.list, "nodes", "", "the masters, comma-separated: host:port, redis://[user:password@]host[:port][/db] or rediss://...?ca_file=F&cert_file=F&key_file=F&server_name=N (default: $"+envNodes+"; prefer the variable or --nodes-file for passwords)")
	fs.StringVar(&nf.file, "nodes-file", "", "a file naming the masters, one address or URL per line (a line starting with '#' is a comment) (default: $"+envNodesFile+")")
	return nf
}

// nodeList is the masters' addresses as given, and where they came from.
type nodeList struct {
	addrs  []string
	source string // "--nodes", "QUORUMLOCK_NODES", "--nodes-file F", ...
}

// resolve reads the addresses from --nodes, --nodes-file, $QUORUMLOCK_NODES
// or $QUORUMLOCK_NODES_FILE, the first that is set. A list is split at
// commas, a file at line ends. Its errors are usage errors and never show a
// password.
func (nf *nodeFlags) resolve(getenv func(string) string) (nodeList, error) {
	switch {
	case nf.list != "" && nf.file != "":
		return nodeList{}, errors.New("give --nodes or --nodes-file, not both")
	case nf.list != "":
		return splitList(nf.list, "--nodes")
	case nf.file != "":
		return readNodesFile(nf.file, "--nodes-file")
	case getenv(envNodes) != "":
		return splitList(getenv(envNodes), "$"+envNodes)
	case getenv(envNodesFile) != "":
		return readNodesFile(getenv(envNodesFile), "$"+envNodesFile)
	}
	return nodeList{}, fmt.Errorf("no masters given: use --nodes, --nodes-file, $%s or $%s", envNodes, envNodesFile)
}

func splitList(s, source string) (nodeList, error) {
	nl := nodeList{source: source}
	for _, a := range strings.Split(s, ",") {
		nl.addrs = append(nl.addrs, strings.TrimSpace(a))
	}
	return nl, nil
}

func readNodesFile(name, source string) (nodeList, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nodeList{}, fmt.Errorf("%s %q: %v", source, name, err)
	}
	nl := nodeList{source: fmt.Sprintf("%s %q", source, name)}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			nl.addrs = append(nl.addrs, line)
		}
	}
	if len(nl.addrs) == 0 {
		return nodeList{}, fmt.Errorf("%s names no master", nl.source)
	}
	return nl, nil
}

// addrError is the usage error for address i (0-based) of the list. When
// the list holds a password somewhere ('@') and the address itself has
// none, a split may have cut a password at an unencoded ',' ("redis://u:p"
// and "w@host"), so redisnode's reason, which would quote the piece, is
// not shown.
func (nl nodeList) addrError(i int, err error) error {
	a := nl.addrs[i]
	if a == "" {
		return fmt.Errorf("master %d of %s is empty", i+1, nl.source)
	}
	for _, b := range nl.addrs {
		if strings.Contains(b, "@") && !strings.Contains(a, "@") {
			return fmt.Errorf("master %d of %s is not a valid address (not shown: the list holds a password; write a ',' in a password as %%2C)", i+1, nl.source)
		}
	}
	return fmt.Errorf("master %d of %s: %v", i+1, nl.source, err)
}

// dial builds a redisnode.Node for every address (it contacts no server).
// Errors name the address by its position and never show a password; two
// addresses with the same host:port are refused.
func (nl nodeList) dial() (redisnode.Nodes, error) {
	var ns redisnode.Nodes
	seen := map[string]int{}
	for i, a := range nl.addrs {
		var n *redisnode.Node
		var err error
		if a != "" {
			n, err = redisnode.Dial(a)
		}
		if a == "" || err != nil {
			_ = ns.Close()
			return nil, nl.addrError(i, err)
		}
		if j, dup := seen[n.Addr()]; dup {
			_ = n.Close()
			_ = ns.Close()
			return nil, fmt.Errorf("masters %d and %d of %s are both %s", j+1, i+1, nl.source, n.Addr())
		}
		seen[n.Addr()] = i
		ns = append(ns, n)
	}
	return ns, nil
}

// rawClient is a go-redis client for reading one master (status, doctor).
type rawClient struct {
	addr string // host:port, never a password
	c    *redis.Client
}

// rawClients builds a reading client per address, with lock-safe settings
// and a dial timeout of at most dialTimeout (status and doctor are bounded
// by their own deadline; a TLS handshake on a busy machine can outlast the
// lock's 250ms).
func (nl nodeList) rawClients(dialTimeout time.Duration) ([]rawClient, error) {
	var cs []rawClient
	closeAll := func() {
		for _, c := range cs {
			_ = c.c.Close()
		}
	}
	seen := map[string]int{}
	for i, a := range nl.addrs {
		var opt *redis.Options
		var err error
		if a != "" {
			opt, err = lockkey.Options(a)
		}
		if a == "" || err != nil {
			closeAll()
			return nil, nl.addrError(i, err)
		}
		if j, dup := seen[opt.Addr]; dup {
			closeAll()
			return nil, fmt.Errorf("masters %d and %d of %s are both %s", j+1, i+1, nl.source, opt.Addr)
		}
		seen[opt.Addr] = i
		opt.DialTimeout = max(opt.DialTimeout, dialTimeout)
		cs = append(cs, rawClient{addr: opt.Addr, c: redis.NewClient(opt)})
	}
	return cs, nil
}

func closeRaw(cs []rawClient) {
	for _, c := range cs {
		_ = c.c.Close()
	}
}
