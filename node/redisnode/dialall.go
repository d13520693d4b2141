package redisnode

import (
	"errors"
	"fmt"

	"github.com/quorumlock/quorumlock/redlock"
)

// Nodes is a set of nodes built together by DialAll, in the order of their
// addresses. Close closes them as one.
type Nodes []*Node

// DialAll builds a Node for each address with Dial (same address forms,
// same lock-safe settings) and does not contact the servers. With no
// address, or when one fails, it closes the nodes it built and returns an
// error starting "redisnode: " that names the failing address by its
// position (1-based) and Dial's reason; it never contains a password.
func DialAll(addrs ...string) (Nodes, error) {
	if len(addrs) == 0 {
		return nil, errors.New("redisnode: DialAll: no addresses")
	}
	ns := make(Nodes, 0, len(addrs))
	for i, a := range addrs {
		n, err := Dial(a)
		if err != nil {
			_ = ns.Close() // nothing was contacted; the clients only need closing
			return nil, fmt.Errorf("redisnode: DialAll: address %d of %d: %w", i+1, len(addrs), err)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// Redlock returns the nodes as redlock.Node values, for redlock.New.
func (ns Nodes) Redlock() []redlock.Node {
	out := make([]redlock.Node, len(ns))
	for i, n := range ns {
		out[i] = n
	}
	return out
}

// Close closes every node (as Node.Close) and returns their errors joined.
func (ns Nodes) Close() error {
	var errs []error
	for _, n := range ns {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}
