package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Leader election on the same quorum: two candidates campaign, one leads
// (its term is a fencing token), the other waits; Leader tells anyone who
// leads; when the leader resigns, the waiting candidate is elected with a
// higher term. The masters here are in memory (memnode); use
// redisnode.Dial for real ones.
func ExampleClient_NewElection() {
	var nodes []redlock.Node
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		nodes = append(nodes, memnode.New(addr))
	}
	client, err := redlock.New(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	election, err := client.NewElection("locks:scheduler", redlock.WithTTL(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first, err := election.Campaign(ctx, "node-a") // elected at once: nobody leads
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, err := election.Leader(ctx)
	fmt.Println("leader:", leader.Value, err == nil && leader.Term == first.Term())

	second := make(chan *redlock.Leadership)
	go func() { // node-b waits until node-a's leadership ends
		l, err := election.Campaign(ctx, "node-b")
		if err != nil {
			fmt.Println(err)
		}
		second <- l
	}()
	if err := first.Resign(ctx); err != nil {
		fmt.Println(err)
	}
	<-first.Context().Done() // done: node-a must stop acting as the leader
	fmt.Println("node-a resigned:", errors.Is(context.Cause(first.Context()), redlock.ErrReleased))
	next := <-second
	now, _ := election.Leader(ctx)
	fmt.Println("next leader:", now.Value, "with a higher term:", next.Term() > first.Term())
	_ = next.Resign(ctx)
	// Output:
	// leader: node-a true
	// node-a resigned: true
	// next leader: node-b with a higher term: true
}
