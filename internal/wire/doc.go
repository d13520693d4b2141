// Package wire is the one owner of quorumlock's wire contract with a node:
// the names of the keys a lock keeps beside its own (fencing counter,
// waiting marks, waiting line and its expiries, release guards, an
// election's term records) and of its release channel, the Redis Cluster
// hash-tag rule that keeps them in the lock key's slot, and the encodings
// of what the keys hold (a lock value and its owner metadata, a hold's
// sorted-set member and group, a waiter ID, a fencing counter).
//
// node/redisnode sends these names as KEYS and ARGV to its Lua scripts
// (node/redisnode/scripts), which take every name from Go and spell only
// the encodings they read and write (a hold's member, the fencing
// counter's value, a waiter's group): redisnode's Scripts says which. node/memnode, node/nodetest, the
// coordinator (package redlock), internal/lockkey (quorumlock status and
// doctor), the fault-injection harness and the benchmark use this package,
// and no other code spells a name or an encoding. It imports only the
// standard library.
package wire
