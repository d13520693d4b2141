// Package bench measures quorumlock side by side with the Redis locks Go
// users pick instead, on real redis-server processes over loopback.
//
// One lock+unlock cycle from one goroutine is measured for each contender
// (Contenders: the floor, i.e. SET NX PX plus a compare-and-delete script on
// one node; bsm/redislock on one node; quorumlock plain, WithFencing and
// WithAutoRenew; redsync with its defaults; rueidislock with one key per
// master) with N = 1, 3 and 5 masters. Every go-redis client has the same
// context-honouring settings (GoRedisOptions), every contender the same TTL.
// Run interleaves the contenders round by round (each runs a slice of
// cycles, then the next, in an order shuffled per round), so that a noisy
// machine slows them alike, and reports per contender, N and condition
// (Row): p50/p90/p99/max cycle latency, cycles/s, heap allocations and bytes
// per cycle (runtime.MemStats deltas around the contender's slices) and the
// keys it left on the servers once closed. WriteMarkdown and WriteJSON
// print the rows. A Condition can add a delay in the client before every
// write to every node (Delayed); the kernel is not involved.
//
// Compare ratios within one run, not absolute numbers across machines.
//
// The side-by-side runner starts 5 redis-server processes (or takes
// -addrs) and prints a markdown table:
//
//	cd bench && go run ./cmd/sidebyside -n 1,3,5 -cycles 2000
//	cd bench && go run ./cmd/sidebyside -delay 0,1ms -json rows.json
//
// The same contenders as go test benchmarks (named
// BenchmarkLockUnlock/contender=redsync/n=5), for benchstat:
//
//	cd bench && go test -run '^$' -bench . -count 6 | tee new.txt && benchstat new.txt
//
// go test ./... runs a small side-by-side and every benchmark case once; it
// needs redis-server in PATH (skipped without it, failed with CI=true).
package bench
