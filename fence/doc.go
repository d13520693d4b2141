// Package fence is the resource side of fencing: it carries a lock's
// fencing token to the resource and makes the resource refuse a write whose
// token is below the highest it has seen, in the same atomic step as the
// write. A holder paused past its lease, whose lock another client has
// taken since, then cannot overwrite the newer holder's work.
//
// A token is the int64 of redlock.Lease.Fence (a mutex made with
// redlock.WithFencing), as Token. It travels in an HTTP header (Header,
// SetHeader, FromHeader), as a SQL parameter (Token is a driver.Valuer), or
// in the environment variable QUORUMLOCK_FENCE that "quorumlock run
// --fencing" sets for its command (FromEnv).
//
// The guards, each one atomic step that checks and writes:
//   - GuardSQL: a conditional upsert of the resource's high-water mark in
//     the caller's own transaction (PostgreSQL), which also writes the data.
//   - PutObject: a compare-and-swap on an object store (S3 If-Match, GCS
//     generation preconditions) through the ObjectStore interface; MemStore
//     is an in-memory one.
//   - package fence/redisguard: one Lua script on Redis.
//
// Every guard accepts a token equal to the highest seen: the same lease
// writes as often as it needs, and two leases never share a token
// (redlock's tokens grow with every acquisition). A lower token is refused
// with a *StaleError (errors.Is(err, ErrStale)) that names both tokens. A
// token below 1 is refused with ErrInvalid: fencing tokens start at 1, and a
// 0 is what a lease without redlock.WithFencing carries.
//
// The package depends on the standard library only. docs/fencing.md is the
// longer story, with the recipes for S3 and GCS.
package fence
