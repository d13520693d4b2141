// Package bench measures quorumlock side by side with the Redis locks Go
// users pick instead, on real redis-server processes over loopback or on
// masters the user gives.
//
// The contenders (Contenders): the floor, i.e. SET NX PX plus a
// compare-and-delete script on one node; bsm/redislock on one node;
// quorumlock plain, WithFencing and WithAutoRenew; redsync with its
// defaults and with WithFailFast; rueidislock with one key per master.
// Every go-redis client has the lock settings of redisnode.Dial
// (Master.GoRedisOptions), every contender the same TTL. Masters come from
// ParseMasters (host:port or redis:// and rediss:// URLs, read as
// redisnode.Dial reads them; a Master prints as host:port, never with its
// password) or, by default, from redis-server processes the run starts.
//
// Run measures one lock+unlock cycle from one goroutine for every
// contender, N and condition (Case), interleaved: in each round every
// entry runs a slice of cycles, in an order shuffled per round, so that a
// noisy machine slows them alike. A Condition adds, in the client (a
// net.Conn wrapper: the kernel is not involved), a delay before every
// write to every master (Delayed), a uniformly jittered one (Jittered), a
// delay on the first master (OneSlow), or a fault of the first master
// from the first measured cycle until it returns after the measurement
// (OneHung: writes held and run when it returns; OneDead: dials refused,
// connections reset). Contention adds a measurement of several lockers
// (each with its own clients) on one lock. Each Row holds p50/p90/p99/max,
// cycles/s, allocations and bytes per cycle (runtime.MemStats), client CPU
// per cycle (getrusage), the goroutines the contender started (counted by
// their pprof label) after its loop and after Close, the keys it left on
// the masters, the first cycle after a master's death, and under
// contention acquisitions/s, the share of same-client re-locks, the
// handoff to another client and the longest wait. WriteMarkdown,
// WriteJSON, WriteSVG and WriteTargets print them.
//
// Compare ratios within one run, not absolute numbers across machines.
//
// The command runs every condition and prints tables, targets and a chart:
//
//	cd bench && go run ./cmd/quorumlock-bench --quick
//	cd bench && go run ./cmd/quorumlock-bench --json rows.json --svg chart.svg
//	cd bench && go run ./cmd/quorumlock-bench --nodes redis://:pw@10.0.0.1:6379,redis://:pw@10.0.0.2:6379,...
//
// cmd/sidebyside runs chosen sizes and delays only.
//
// The same contenders as go test benchmarks (named
// BenchmarkLockUnlock/contender=redsync/n=5), for benchstat and profiles;
// -count repeats each one back to back, it does not interleave them:
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 6 | tee new.txt && benchstat new.txt
//
// go test ./... runs a small side-by-side, every condition and the
// contention briefly, and every benchmark case once; it needs redis-server
// in PATH (skipped without it, failed with CI=true).
package bench
