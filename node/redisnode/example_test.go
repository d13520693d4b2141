package redisnode_test

import (
	"context"
	"fmt"

	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Dial takes host:port or a redis:// or rediss:// URL (user and password
// for an ACL user, a db, and for TLS a CA file, a client certificate and a
// server name). It does not contact the server, so a bad address fails here,
// naming the bad part, and never showing the password.
func ExampleDial() {
	var nodes []redlock.Node
	for _, addr := range []string{
		"redis://locker:s3cret@redis-1:6379", // ACL user locker (docs/nodes.md, "Minimal ACL")
		"redis-2:6379",                       // no password, db 0
		"rediss://locker:s3cret@redis-3:6380/0?server_name=redis-3.internal", // TLS, system roots; add ca_file=, cert_file=, key_file=
	} {
		n, err := redisnode.Dial(addr)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer n.Close()
		fmt.Println(n)
		nodes = append(nodes, n)
	}
	client, err := redlock.New(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())

	_, err = redisnode.Dial("redis://locker:s3cret@redis-1:6379/x")
	fmt.Println(err)
	// Output:
	// redisnode.Node(redis-1:6379)
	// redisnode.Node(redis-2:6379)
	// redisnode.Node(redis-3:6380)
	// redisnode: bad db "x" in URL (want /N with N >= 0)
}

// DialAll dials every master at once and closes them as one; a bad address
// fails it, naming its position, and closes what was built.
func ExampleDialAll() {
	nodes, err := redisnode.DialAll("redis://locker:s3cret@redis-1:6379", "redis-2:6379", "redis-3:6379")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nodes.Close()
	client, err := redlock.New(nodes.Redlock())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	fmt.Println(nodes)

	_, err = redisnode.DialAll("redis-1:6379", "redis://locker:s3cret@redis-2:99999")
	fmt.Println(err)
	// Output:
	// [redisnode.Node(redis-1:6379) redisnode.Node(redis-2:6379) redisnode.Node(redis-3:6379)]
	// redisnode: DialAll: address 2 of 2: redisnode: bad port "99999" (want 1..65535)
}
