package faultinject

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// A master's own network (Config.Netns, process backend): the master runs
// in a network namespace of its own, reached from the host over a veth
// pair with a /30 of 10.213.0.0/16, so that nftables rules in that
// namespace (OneWayPartition) drop one direction of its traffic at the IP
// level, as a broken link or a one-way firewall rule does, without
// touching the host's rules. Creating it needs root, ip (iproute2) and,
// for the drops, nft (nftables).

// netnsTable is the nftables table of a master's namespace.
const netnsTable = "quorumlock"

// netnsTools are the commands a master's own network needs.
var netnsTools = []string{"ip", "nft"}

// canNetns reports why this process cannot give a master its own network
// (nil: it can).
func canNetns() error {
	var errs []error
	if err := canMount(); err != nil {
		errs = append(errs, err)
	}
	for _, tool := range netnsTools {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: %s not found in PATH (Debian: apt-get install -y iproute2 nftables)", tool))
		}
	}
	return errors.Join(errs...)
}

// netns is one master's network namespace and veth pair.
type netns struct {
	name     string // the namespace (ip netns), named after the cluster's label
	hostIf   string // the host's end of the veth pair
	hostIP   string
	serverIP string // the master binds here
}

var (
	subnetMu   sync.Mutex
	subnetNext = -1 // the next /30 to try, drawn once per process
)

// nextSubnet returns a /30 of 10.213.0.0/16 (its third and fourth octets'
// base) that no interface of the host uses.
func nextSubnet() (byte, byte, error) {
	subnetMu.Lock()
	defer subnetMu.Unlock()
	if subnetNext < 0 {
		var b [2]byte
		_, _ = rand.Read(b[:])
		subnetNext = int(b[0])<<8 | int(b[1])
	}
	used := map[string]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			used[n.IP.Mask(net.CIDRMask(30, 32)).String()] = true
		}
	}
	for range 1 << 14 {
		subnetNext = (subnetNext + 4) & 0xfffc
		c, d := byte(subnetNext>>8), byte(subnetNext)
		if !used[fmt.Sprintf("10.213.%d.%d", c, d)] {
			return c, d, nil
		}
	}
	return 0, 0, errors.New("faultinject: no free /30 in 10.213.0.0/16")
}

// run runs a command and returns its error with its output.
func run(ctx context.Context, stdin string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("faultinject: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// newNetns creates the namespace of master index of the cluster labelled
// label, its veth pair and an empty nftables table with an input and an
// output chain. On error nothing is left.
func newNetns(ctx context.Context, label string, index int) (*netns, error) {
	c, d, err := nextSubnet()
	if err != nil {
		return nil, err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	n := &netns{
		name:     fmt.Sprintf("%s-node%d", label, index),
		hostIf:   "qlh" + id, // interface names have at most 15 bytes
		hostIP:   fmt.Sprintf("10.213.%d.%d", c, d+1),
		serverIP: fmt.Sprintf("10.213.%d.%d", c, d+2),
	}
	peer := "qln" + id
	steps := [][]string{
		{"ip", "netns", "add", n.name},
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", peer, "netns", n.name},
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"ip", "-n", n.name, "addr", "add", n.serverIP + "/30", "dev", peer},
		{"ip", "-n", n.name, "link", "set", peer, "up"},
		{"ip", "-n", n.name, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, "", s[0], s[1:]...); err != nil {
			return nil, errors.Join(err, n.remove(context.WithoutCancel(ctx)))
		}
	}
	rules := fmt.Sprintf("table inet %s {\n chain in { type filter hook input priority 0; policy accept; }\n chain out { type filter hook output priority 0; policy accept; }\n}\n", netnsTable)
	if err := n.nft(ctx, rules); err != nil {
		return nil, errors.Join(err, n.remove(context.WithoutCancel(ctx)))
	}
	return n, nil
}

// exec is the prefix that runs a command in the namespace.
func (n *netns) exec() []string { return []string{"ip", "netns", "exec", n.name} }

// nft loads rules into the namespace's nftables.
func (n *netns) nft(ctx context.Context, rules string) error {
	return run(ctx, rules, "ip", "netns", "exec", n.name, "nft", "-f", "-")
}

// drop makes the namespace drop the TCP traffic of port in direction dir:
// Upstream the packets that reach the master (requests, and the SYNs of
// new connections), Downstream those it sends (replies, and the SYN-ACKs),
// Both both. It replaces the drops in force.
func (n *netns) drop(ctx context.Context, port string, dir Direction) error {
	rules := fmt.Sprintf("flush chain inet %[1]s in\nflush chain inet %[1]s out\n", netnsTable)
	switch dir {
	case Upstream:
		rules += fmt.Sprintf("add rule inet %s in tcp dport %s drop\n", netnsTable, port)
	case Downstream, "":
		rules += fmt.Sprintf("add rule inet %s out tcp sport %s drop\n", netnsTable, port)
	case Both:
		rules += fmt.Sprintf("add rule inet %[1]s in tcp dport %[2]s drop\nadd rule inet %[1]s out tcp sport %[2]s drop\n", netnsTable, port)
	default:
		return fmt.Errorf("faultinject: unknown direction %q (want downstream, upstream or both)", string(dir))
	}
	return n.nft(ctx, rules)
}

// pass removes the drops.
func (n *netns) pass(ctx context.Context) error {
	return n.nft(ctx, fmt.Sprintf("flush chain inet %[1]s in\nflush chain inet %[1]s out\n", netnsTable))
}

// remove deletes the namespace (its veth pair and rules go with it).
func (n *netns) remove(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join("/run/netns", n.name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return run(ctx, "", "ip", "netns", "del", n.name)
}
